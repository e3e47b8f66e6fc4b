#!/usr/bin/env python3
"""`tessel report` in a real headless browser (docs/report.md).

    test_report.py [--tessel BIN] [--chromium BIN] [--artefacts DIR] [unittest options]

Writes a report for a small ONNX model (a GEMM, elementwise ops, a node the
interpreter runs, and node names meant to break out of the page), opens it
in Debian's chromium (--headless=new) and drives it over the DevTools
protocol with a minimal WebSocket client of the standard library. Checks:
no console error or exception, no request but the file itself, the table
sorts when a header is clicked, clicking a row or a roofline point shows
that kernel's loop IR and LLVM IR, the roofline has one point per row, the
graph of the fused groups has a box per group and an edge per value between
them, the groups' list expands, the hostile names stay text. A screenshot goes to
<artefacts>/report.png (default build/test_artefacts). Fails, not skips,
without chromium: scripts/setup.sh installs it.
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TESSEL = os.path.join(ROOT, "build", "bin", "tessel")
CHROMIUM = None
ARTEFACTS = os.path.join(ROOT, "build", "test_artefacts")

# Node names that would run script or add markup if the page put them into
# its HTML unescaped.
HOSTILE_GEMM = 'mm</script><img src=x onerror="window.__pwned=1">'
HOSTILE_ADD = "add<b>&amp;</b>'\"<!--"


def report_model():
    """y = softmax(relu(x @ w + b)); nz = NonZero(x) (runs on the interpreter)."""
    rng = np.random.default_rng(1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 48])
    nz = helper.make_tensor_value_info("nz", TensorProto.INT64, [2, "n"])
    w = numpy_helper.from_array(rng.standard_normal((64, 48)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(48).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"], name=HOSTILE_GEMM),
             helper.make_node("Add", ["xw", "b"], ["xwb"], name=HOSTILE_ADD),
             helper.make_node("Relu", ["xwb"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"], axis=1),
             helper.make_node("NonZero", ["x"], ["nz"], name="nonzero")]
    g = helper.make_graph(nodes, "g", [x], [y, nz], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


# ---- a minimal WebSocket client (RFC 6455), enough for the DevTools protocol ----
class WebSocket:
    def __init__(self, url, timeout=30):
        u = urllib.parse.urlparse(url)
        assert u.scheme == "ws", url
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + ("?" + u.query if u.query else "")
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("websocket: connection closed during the handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in lines[0] + " ":
            raise ConnectionError(f"websocket: handshake refused: {lines[0]}")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
        if headers.get("sec-websocket-accept", "").encode() != accept:
            raise ConnectionError("websocket: bad Sec-WebSocket-Accept")

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("websocket: connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send_frame(self, opcode, payload):
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def recv(self):
        """The next text message (fragments joined; pings answered)."""
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0x8:
                raise ConnectionError("websocket: closed by the browser")
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def close(self):
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class DevTools:
    """Commands and events of one page target."""

    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method, timeout=30):
        deadline = time.time() + timeout
        for e in self.events:
            if e["method"] == method:
                return e
        self.ws.sock.settimeout(timeout)
        while time.time() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg
        raise TimeoutError(method)

    def js(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def click(self, selector):
        """A real mouse click at the middle of the element (scrolled into view)."""
        box = self.js(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e) return null; e.scrollIntoView({{block: "center", inline: "center"}});
            const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        if box is None:
            raise AssertionError(f"no element {selector}")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def close(self):
        self.ws.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """chromium --headless=new with the DevTools protocol on a local port."""

    def __init__(self, binary, tmp):
        self.profile = os.path.join(tmp, "profile")
        os.makedirs(self.profile)
        args = [binary, "--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--mute-audio", "--window-size=1400,1000",
                "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                f"--user-data-dir={self.profile}", "about:blank"]
        # The page is our own file: no sandbox, which chromium refuses to run
        # as root and which needs user namespaces that containers may lack.
        args.insert(1, "--no-sandbox")
        self.log = open(os.path.join(tmp, "chromium.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        # Chromium writes the port it listens on (line 1) and the browser's
        # path (line 2) into the profile once DevTools is up.
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 60
        while True:
            text = ""
            if os.path.exists(port_file):
                with open(port_file) as f:
                    text = f.read()
            if "\n" in text:
                break
            if self.proc.poll() is not None or time.time() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start (exit {self.proc.returncode}); see {self.log.name}")
            time.sleep(0.1)
        self.port = int(text.split("\n")[0])

    def page(self):
        """A fresh page target's DevTools connection."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=30) as r:
            target = json.loads(r.read())
        return DevTools(target["webSocketDebuggerUrl"]), target["id"]

    def close_page(self, target_id):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/close/{target_id}", timeout=30):
            pass

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class ReportInBrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not CHROMIUM:
            raise AssertionError("chromium not found (scripts/setup.sh installs Debian's chromium; or pass --chromium)")
        cls.tmp = tempfile.mkdtemp(prefix="tessel_report_")
        model = os.path.join(cls.tmp, "m.onnx")
        onnx.save(report_model(), model)
        cls.html = os.path.join(cls.tmp, "report.html")
        env = dict(os.environ, TESSEL_CACHE_DIR=os.path.join(cls.tmp, "cache"))
        p = subprocess.run([TESSEL, "report", model, "-o", cls.html, "--iters", "5", "--warmup", "1", "--threads", "1",
                            "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        if p.returncode != 0:
            raise AssertionError(f"tessel report failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
        cls.url = "file://" + urllib.parse.quote(cls.html)
        cls.browser = Browser(CHROMIUM, cls.tmp)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "browser", None):
            cls.browser.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.dt, self.target = self.browser.page()
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.dt.call(domain + ".enable")
        self.dt.call("Page.navigate", url=self.url)
        self.dt.wait_event("Page.loadEventFired")
        deadline = time.time() + 30
        while not self.dt.js("document.body && document.body.dataset.ready === '1'"):
            self.assertLess(time.time(), deadline, "the page's script did not finish")
            time.sleep(0.05)
        self.data = self.dt.js("JSON.parse(document.getElementById('tessel-data').textContent)")

    def tearDown(self):
        self.dt.close()
        self.browser.close_page(self.target)

    def rows(self):
        return self.dt.js("Array.from(document.querySelectorAll('#kernels tbody tr')).map(r => Number(r.dataset.step))")

    def step(self, i):
        return next(s for s in self.data["steps"] if s["step"] == i)

    def test_loads_without_errors_or_requests(self):
        self.dt.js("new Promise(r => setTimeout(r, 300))")  # late errors and requests
        errors = []
        for e in self.dt.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                errors.append(p["exceptionDetails"])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(p)
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                errors.append(p["entry"])
        self.assertEqual(errors, [])
        urls = [e["params"]["request"]["url"] for e in self.dt.events if e["method"] == "Network.requestWillBeSent"]
        self.assertEqual(urls, [self.url], "the page must request nothing but itself")
        self.assertEqual(self.dt.js("performance.getEntriesByType('resource').length"), 0)

    def test_hostile_names_stay_text(self):
        self.assertEqual(self.dt.js("document.querySelectorAll('img').length"), 0)
        self.assertIsNone(self.dt.js("window.__pwned === undefined ? null : window.__pwned"))
        self.assertEqual(self.dt.js("document.querySelectorAll('script').length"), 2)
        self.dt.js("document.getElementById('expand-all').click()")
        cells = self.dt.js("Array.from(document.querySelectorAll('#groups td')).map(td => td.textContent)")
        self.assertIn(HOSTILE_GEMM, cells)
        self.assertIn(HOSTILE_ADD, cells)
        self.assertTrue(self.dt.js("document.title").startswith("tessel report: "))

    def test_table_sorts_when_a_header_is_clicked(self):
        steps = self.data["steps"]
        self.assertGreaterEqual(len(steps), 3)  # two kernels and the interpreter's NonZero
        time_of = {s["step"]: s["median_ms"] for s in steps}
        by_time = self.rows()
        self.assertEqual([time_of[i] for i in by_time], sorted(time_of.values(), reverse=True), "slowest first")
        self.dt.click('#kernels th[data-key="median_ms"]')
        self.assertEqual([time_of[i] for i in self.rows()], sorted(time_of.values()), "fastest first after a click")
        self.assertEqual(self.dt.js("document.querySelector('#kernels th[data-key=median_ms]').getAttribute('aria-sort')"),
                         "ascending")
        self.dt.click('#kernels th[data-key="step"]')
        self.assertEqual(self.rows(), sorted(time_of, reverse=True))
        self.dt.click('#kernels th[data-key="name"]')
        names = [self.step(i)["name"] for i in self.rows()]
        self.assertEqual(names, sorted(names, key=str.lower))
        bound = {s["step"]: s["of_bound"] for s in steps}
        self.dt.click('#kernels th[data-key="of_bound"]')
        self.assertEqual([bound[i] for i in self.rows()], sorted(bound.values(), reverse=True))

    def test_clicking_a_kernel_shows_its_code(self):
        kernels = [s for s in self.data["steps"] if s["kind"] == "kernel"]
        self.assertGreaterEqual(len(kernels), 2)
        for k in kernels:
            self.dt.click(f'#kernels tbody tr[data-step="{k["step"]}"]')
            self.assertEqual(self.dt.js("document.getElementById('detail-title').textContent"), k["name"])
            loop_ir = self.dt.js("document.getElementById('loop-ir').textContent")
            self.assertTrue(loop_ir.startswith(f"kernel {k['name']}("), loop_ir[:80])
            llvm = self.dt.js("document.getElementById('llvm-ir').textContent")
            self.assertIn("define", llvm)
            self.assertIn(f"@{k['llvm_function']}(", llvm)
            self.assertEqual(self.dt.js("document.querySelector('#kernels tr.selected').dataset.step"), str(k["step"]))
        # A point of the roofline selects its kernel too.
        k = kernels[0]
        self.dt.click(f'#roofline circle.pt[data-step="{k["step"]}"]')
        self.assertEqual(self.dt.js("document.getElementById('detail-title').textContent"), k["name"])
        self.assertEqual(self.dt.js("document.querySelector('#roofline circle.pt.selected').dataset.step"), str(k["step"]))
        # The interpreter's step says so.
        interp = next(s for s in self.data["steps"] if s["kind"] == "interpreter")
        self.dt.click(f'#kernels tbody tr[data-step="{interp["step"]}"]')
        self.assertIn("reference interpreter", self.dt.js("document.getElementById('detail').textContent"))

    def test_roofline_has_one_point_per_row(self):
        points = self.dt.js("Array.from(document.querySelectorAll('#roofline circle.pt')).map(c => Number(c.dataset.step))")
        self.assertEqual(sorted(points), sorted(self.rows()))
        self.assertEqual(len(points), len(self.data["steps"]))
        # The ceilings: the FMA peak and a line per memory level.
        ceilings = self.dt.js("document.querySelectorAll('#panel-flops line.ceiling').length")
        levels = len(self.data["roofline"]["ceilings"]["sets"][-1]["levels"])
        self.assertGreaterEqual(ceilings, levels + 1)
        # Points lie inside the plot.
        inside = self.dt.js("""Array.from(document.querySelectorAll('#roofline circle.pt')).every(c => {
            const r = c.getBoundingClientRect(), s = document.getElementById('roofline').getBoundingClientRect();
            return r.width > 0 && r.left >= s.left - 1 && r.right <= s.right + 1; })""")
        self.assertTrue(inside)

    def test_group_graph_has_a_box_per_group_and_its_edges(self):
        groups = self.data["groups"]
        boxes = self.dt.js("Array.from(document.querySelectorAll('#group-graph .gnode')).map(g => Number(g.dataset.group))")
        self.assertEqual(sorted(boxes), list(range(len(groups))))
        edges = sum(len(g["preds"]) for g in groups)
        self.assertGreaterEqual(edges, 1)  # the GEMM's output feeds the softmax group
        self.assertEqual(self.dt.js("document.querySelectorAll('#group-graph path.gedge').length"), edges)
        k = next(s for s in self.data["steps"] if s["kind"] == "kernel" and s["group"] is not None)
        self.dt.click(f'#group-graph .gnode[data-group="{k["group"]}"] rect')
        self.assertEqual(self.dt.js("document.getElementById('detail-title').textContent"), k["name"])
        self.assertEqual(self.dt.js("document.querySelector('#group-graph .gnode.selected').dataset.group"), str(k["group"]))

    def test_groups_expand_and_screenshot(self):
        n = self.dt.js("document.querySelectorAll('details.group').length")
        self.assertEqual(n, len(self.data["groups"]))
        self.assertEqual(self.dt.js("document.querySelectorAll('details.group[open]').length"), 0)
        self.dt.click("#expand-all")
        self.assertEqual(self.dt.js("document.querySelectorAll('details.group[open]').length"), n)
        self.dt.click("#collapse-all")
        self.assertEqual(self.dt.js("document.querySelectorAll('details.group[open]').length"), 0)
        passes = self.dt.js("document.querySelectorAll('#passes tbody tr').length")
        self.assertEqual(passes, len(self.data["passes"]))
        self.assertGreater(passes, 5)
        self.dt.js("window.scrollTo(0, 0)")
        shot = base64.b64decode(self.dt.call("Page.captureScreenshot", format="png")["data"])
        self.assertTrue(shot.startswith(b"\x89PNG"))
        os.makedirs(ARTEFACTS, exist_ok=True)
        with open(os.path.join(ARTEFACTS, "report.png"), "wb") as f:
            f.write(shot)


def main():
    global TESSEL, CHROMIUM, ARTEFACTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", default=os.environ.get("TESSEL_BIN", TESSEL))
    ap.add_argument("--chromium", default=os.environ.get("TESSEL_CHROMIUM"))
    ap.add_argument("--artefacts", default=ARTEFACTS)
    args, rest = ap.parse_known_args()
    TESSEL = os.path.abspath(args.tessel)
    CHROMIUM = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    ARTEFACTS = args.artefacts
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
