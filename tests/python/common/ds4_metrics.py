"""Reading a running ds4server's Prometheus /metrics for the benches (bench/batching_cpu):
one scraper instead of one per script."""
import http.client


def scrape(port, prefixes=None):
    """GET /metrics on 127.0.0.1:`port`: {metric name: value}, the samples of one name summed over
    their label sets ({family=...}); only names starting with one of `prefixes` when given.
    Comment lines and values that are not numbers are skipped."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode()
    finally:
        conn.close()
    out = {}
    for line in body.splitlines():
        if not line or line.startswith("#") or " " not in line:
            continue
        k, v = line.rsplit(" ", 1)
        k = k.split("{", 1)[0]
        if prefixes and not k.startswith(tuple(prefixes)):
            continue
        try:
            out[k] = out.get(k, 0.0) + float(v)
        except ValueError:
            pass
    return out
