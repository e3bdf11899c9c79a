# -*- coding: utf-8 -*-
"""TEST DOUBLE of NVIDIA's dcgm-exporter, for the simulated node, which has no GPU, no DCGM and cannot reach NVIDIA's
repository. tests/integration/51-monitoring-live.sh installs it as /usr/bin/dcgm-exporter so that the monitoring
role's own unit (nvidia-dcgm-exporter.service: its sandbox, its listen address, its allowlist) and its counters file
run for real under systemd and Prometheus scrapes them.

What it does like dcgm-exporter 4.8.2 (internal/pkg/counters/counter_config.go, pkg/cmd/app.go at tag 4.5.3-4.8.2):
- takes -f (the counters CSV), -a (listen address HOST:PORT) and -r, -c, -x (accepted, unused);
- reads the CSV as the exporter does (Go's encoding/csv, comment '#', every record 3 fields, each trimmed of
  spaces, no bare double quote, type one of gauge, counter, histogram, summary, label) and exits 1 on a record the
  exporter would refuse;
- serves GET /metrics: every non-label field of the CSV with HELP and TYPE, one sample a GPU of the node's GPU
  snapshot (/etc/moeops/gpu-snapshot.json), labelled gpu, UUID, pci_bus_id, device, modelName, Hostname and the
  label fields, as the exporter's template renders them.
What it does not: read any GPU. Every value is 0, DCGM_EXP_* counts have no sample (no XID was seen), and a
marker family, moeops_dcgm_exporter_test_double, says what answered. Standard library only (the node's python3).
"""
import csv
import http.server
import io
import json
import socket
import sys

TYPES = ("gauge", "counter", "histogram", "summary", "label")
SNAPSHOT = "/etc/moeops/gpu-snapshot.json"


def read_counters(text):
    """[(field, type, help)] as the exporter reads its CSV; ValueError names the record it would refuse."""
    out = []
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    for number, record in enumerate(csv.reader(io.StringIO("\n".join(lines)), strict=True)):
        if not record:
            continue
        if any('"' in field for field in record):
            raise ValueError("record %d: a bare double quote (Go's CSV reader refuses it): %r" % (number, record))
        record = [field.strip(" ") for field in record]
        if len(record) != 3:
            raise ValueError("malformed CSV record %d (%r): expected 3 fields" % (number, record))
        if record[1] not in TYPES:
            raise ValueError("could not find Prometheus metric type %r" % record[1])
        out.append(tuple(record))
    return out


def gpus():
    try:
        with open(SNAPSHOT) as handle:
            return json.load(handle).get("gpus") or []
    except (OSError, ValueError):
        return [{"index": 0, "name": "TEST DOUBLE GPU", "pci_bus_id": "00000000:00:00.0"}]


def render(counters, hostname):
    labels_from = [c for c in counters if c[1] == "label"]
    lines = ["# HELP moeops_dcgm_exporter_test_double 1: a TEST DOUBLE answered, not dcgm-exporter (no GPU was read).",
             "# TYPE moeops_dcgm_exporter_test_double gauge", "moeops_dcgm_exporter_test_double 1"]
    for field, kind, text in counters:
        if kind == "label" or field.startswith("DCGM_EXP_"):
            continue
        lines += ["# HELP %s %s" % (field, text), "# TYPE %s %s" % (field, kind)]
        for gpu in gpus():
            extra = "".join(',%s="%s"' % (label[0], "TEST DOUBLE") for label in labels_from)
            lines.append('%s{gpu="%s",UUID="GPU-test-double-%s",pci_bus_id="%s",device="nvidia%s",modelName="%s",'
                         'Hostname="%s"%s} 0' % (field, gpu.get("index", 0), gpu.get("index", 0), gpu.get("pci_bus_id", ""),
                                                 gpu.get("index", 0), gpu.get("name", ""), hostname, extra))
    return "\n".join(lines) + "\n"


def main(argv):
    args = {"-f": "/etc/dcgm-exporter/default-counters.csv", "-a": ":9400"}
    i = 0
    while i < len(argv):
        if argv[i] in ("-f", "-a", "-r", "-c", "-x") and i + 1 < len(argv):
            args[argv[i]] = argv[i + 1]
            i += 2
        else:
            i += 1
    with open(args["-f"]) as handle:
        try:
            counters = read_counters(handle.read())
        except ValueError as exc:
            sys.stderr.write("TEST DOUBLE dcgm-exporter: %s\n" % exc)
            return 1
    body = render(counters, socket.gethostname()).encode()
    host, port = args["-a"].rsplit(":", 1)
    host = host.strip("[]") or "0.0.0.0"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != "/metrics":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server_class = http.server.HTTPServer
    if ":" in host:
        server_class = type("V6Server", (http.server.HTTPServer,), {"address_family": socket.AF_INET6})
    server = server_class((host, int(port)), Handler)
    sys.stderr.write("TEST DOUBLE dcgm-exporter: %d fields from %s, listening on %s\n" % (len(counters), args["-f"], args["-a"]))
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
