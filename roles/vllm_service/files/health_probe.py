# One poll of the vLLM server for the role's /health wait and rollback: /health's HTTP status and what
# systemd says of the unit, as one JSON line. Args: the /health URL and the unit name.
import json
import subprocess
import sys
import urllib.error
import urllib.request

url, unit = sys.argv[1:3]
try:
    health = urllib.request.urlopen(url, timeout=5).status
except urllib.error.HTTPError as e:
    health = e.code
except Exception:
    health = None
show = subprocess.run(["systemctl", "show", unit, "-p", "ActiveState,SubState,NRestarts,ExecMainStatus,MainPID"],
                      capture_output=True, text=True, check=False).stdout
state = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
last = subprocess.run(["journalctl", "-u", unit, "-n", "1", "-o", "cat", "--no-pager"],
                      capture_output=True, text=True, check=False).stdout.strip()
print(json.dumps(dict(state, health=health, last_log=last[-300:])))
