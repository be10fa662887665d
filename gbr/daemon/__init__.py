"""`gleambrctl serve`: the long-running daemon that watches, re-indexes and answers over HTTP.

discovery   `daemon.json` next to the index: how clients find a live daemon, and the lock
            that keeps a second one away
client      a small sync HTTP client that returns the CLI's `--json` objects
service     the daemon's state: store, searcher, supervised Indexer and Oracle actors, watcher
app         the FastAPI routes and their error handling
server      start, publish, trap signals, shut down in order
watcher     watchfiles in a thread, debounced batches of changed paths
metrics     counters and histograms rendered in the Prometheus text format

The CLI imports only `discovery` and `client` unless it runs `serve`, so that a command
that finds no daemon pays nothing for FastAPI.
"""
