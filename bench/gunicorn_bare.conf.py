"""gunicorn's own defaults for the benchmarks that state every option they use: without this
file gunicorn would read the image's gunicorn.conf.py from the working directory, whose access
log to standard output would add its cost to every timed request."""
