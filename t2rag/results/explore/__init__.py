"""`t2rag explore RUN_DIR`: a local web page over a run's records (the report's tables and plots, and a question
browser by method, subset and outcome). `index` holds the run; `app` serves it."""
