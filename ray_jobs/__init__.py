"""Batch entry points for `ray job submit`: they wire t2rag objects into Ray Data; no benchmark logic lives here."""
