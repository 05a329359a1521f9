"""Worker processes for jobs: a pool (pool.py) and a worker's life (serve.py). Importing it loads no TensorFlow,
so `augd run` can start its workers before the parent process loads TensorFlow itself."""
