"""The pages benchmark's client: a second process of threads, each a physician's browser.

Each thread keeps its session cookie and one keep-alive connection (http.client) and, per
round, opens the home page, the rubric editor, the ideal-response editor, the consensus
ballot and a labeling item, then labels it with the htmx POST that brings the next item.
Round -1 warms the server up and is not timed. With "think": [low, high] in the config (the
soak), each client waits a random time in that range, in seconds, before each request, as a
physician reading the page would. Prints one JSON line of latencies per page.

Usage (started by bench/pages_bench.py): python bench/pages_client.py CONFIG.json
"""

import http.client
import json
import random
import re
import resource
import sys
import threading
import time
from pathlib import Path

PAGES = ["home", "rubric editor", "ideal editor", "ballot", "label item", "label (htmx POST)"]
CSRF = re.compile(r'"X-CSRFToken": "([^"]+)"')


class Session:
    """One client: a keep-alive connection and the cookies the server set."""

    def __init__(self, port: int, session_key: str):
        self.port = port
        self.cookies = {"sessionid": session_key}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(
        self, method: str, path: str, body: str | None = None, headers: dict | None = None
    ) -> tuple[int, str, float]:
        head = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()), "Host": "127.0.0.1"}
        head.update(headers or {})
        start = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers=head)
            response = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.conn.request(method, path, body=body, headers=head)
            response = self.conn.getresponse()
        text = response.read().decode()
        elapsed = time.perf_counter() - start
        for value in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        return response.status, text, elapsed


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    port, rounds, deadline = config["port"], config["rounds"], time.monotonic() + config["seconds"]
    physicians = config["physicians"]
    think = config.get("think")
    results: dict[str, list[float]] = {page: [] for page in PAGES}
    errors: list[str] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        mine = physicians[index :: config["clients"]]
        sessions = [Session(port, p["session"]) for p in mine]
        rng = random.Random(index)

        def pause() -> bool:
            """A physician's reading time before the next request; False once the run is over."""
            if think:
                time.sleep(min(rng.uniform(*think), max(0.0, deadline - time.monotonic())))
            return time.monotonic() <= deadline

        # Round -1 warms the workers up and is not counted; the soak (with think time) counts every request.
        for r in range(0 if think else -1, rounds):
            if time.monotonic() > deadline:
                break
            p, s = mine[r % len(mine)], sessions[r % len(sessions)]
            k = r // len(mine) + 1
            t = p["tasks"]
            label_code = t["label"][k % len(t["label"])][0]
            steps: list[tuple[str, str, str, str | None, dict]] = [
                ("home", "GET", "/", None, {}),
                ("rubric editor", "GET", f"/conversations/{t['rubric'][k % len(t['rubric'])][1]}/rubric/", None, {}),
                (
                    "ideal editor",
                    "GET",
                    f"/conversations/{t['ideal_response'][k % len(t['ideal_response'])][1]}/ideal/",
                    None,
                    {},
                ),
                (
                    "ballot",
                    "GET",
                    f"/conversations/{t['consensus_vote'][k % len(t['consensus_vote'])][1]}/votes/",
                    None,
                    {},
                ),
                ("label item", "GET", f"/labels/{label_code}/", None, {}),
            ]
            token = None
            for page, method, path, body, headers in steps:
                if not pause():
                    break
                try:
                    status, text, elapsed = s.request(method, path, body, headers)
                except (http.client.HTTPException, OSError) as exc:  # a timeout counts as an error
                    status, text, elapsed = 0, repr(exc), 0.0
                if status != 200:
                    with lock:
                        errors.append(f"{page} {path}: {status}")
                    continue
                if page == "label item" and (found := CSRF.search(text)):
                    token = found.group(1)
                if r >= 0:
                    with lock:
                        results[page].append(elapsed)
            if token and pause():
                headers = {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "HX-Request": "true",
                    "X-CSRFToken": token,
                }
                try:
                    status, text, elapsed = s.request("POST", f"/labels/{label_code}/", "met=yes&comment=", headers)
                except (http.client.HTTPException, OSError) as exc:
                    status, text, elapsed = 0, repr(exc), 0.0
                if status != 200:
                    with lock:
                        errors.append(f"label POST: {status} {text[:200]}")
                elif r >= 0:
                    with lock:
                        results["label (htmx POST)"].append(elapsed)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(config["clients"])]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "results": results,
                "errors": errors[:20],
                "n_errors": len(errors),
                "seconds": time.perf_counter() - start,
                "client_cpu": usage.ru_utime + usage.ru_stime,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
