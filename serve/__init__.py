"""The Ray Serve application: the t2rag retrievers and generator as deployments behind an HTTP API."""
