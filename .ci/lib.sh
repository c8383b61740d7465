# Helpers for .ci/run (sourced). Each step prints what it does; a failure says why and stops.

# each step says how long CI has run so far (bash's SECONDS), so a slow step shows in the log
step() { printf '\n=== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }
die() { echo "CI: $*" >&2; exit 1; }

# wait_for PID LOG WHAT: wait for a background step; if it failed, print its log and stop.
wait_for() {
    wait "$1" || { cat "$2"; die "$3 failed"; }
}

start_postgres() {
    if pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then echo "postgresql: up"; return; fi
    command -v pg_ctlcluster >/dev/null || die "PostgreSQL is not installed"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
    for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
    pg_isready -h 127.0.0.1 -p 5432 -q || die "PostgreSQL did not start"
    echo "postgresql: started"
}

start_redis() {
    if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then echo "redis: up"; return; fi
    command -v redis-server >/dev/null || die "Redis is not installed"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
    for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG && break; sleep 1; done
    redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG || die "Redis did not start"
    echo "redis: started"
}

# fresh_venv DIR: an empty virtual environment with a current pip.
fresh_venv() {
    rm -rf "$1"
    "$PY" -m venv "$1"
    "$1/bin/python" -m pip install -q --upgrade pip
}

zip_names() { "$PY" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$1"; }

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# serve_smoke "COMMAND ... bunq serve": run it (install steps included) with bunq serve on
# free ports; wait for its "listening" line, GET /health must answer 200, SIGTERM must exit 0.
serve_smoke() {
    local cmd=$1 tcp http log pid code
    tcp=$(free_port); http=$(free_port); log=$(mktemp)
    local data; data=$(mktemp -d)
    ( export BUNQ_DATA_PATH="$data/bunq-data.db"
      eval "${cmd/bunq serve/exec bunq serve --port $tcp --http-port $http}" ) >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
        grep -q "listening" "$log" && break
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log"; die "'$cmd' exited before listening"; }
        sleep 0.5
    done
    grep -q "listening" "$log" || { tail -n 20 "$log"; kill "$pid"; die "'$cmd' did not listen in 300 s"; }
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http/health")
    [[ $code == 200 ]] || { kill "$pid"; die "GET /health answered $code"; }
    pkill -TERM -P "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" && code=0 || code=$?
    # The install steps run in the subshell first, so SIGTERM may reach a wrapper: accept 0
    # from bunq serve itself (exec) or 143 from a shell that forwarded it.
    [[ $code == 0 ]] || { tail -n 20 "$log"; die "bunq serve exited $code after SIGTERM"; }
    grep "listening" "$log" | head -n 2
    echo "ok: '$cmd' served /health (200) and stopped on SIGTERM (exit 0)"
    rm -rf "$log" "$data"
}

# missing_extra_check BUNQ: with only the core installed, an extra's backend names its extra.
missing_extra_check() {
    local out code
    out=$("$1" stats --backend postgresql://127.0.0.1/test 2>&1) && code=0 || code=$?
    [[ $code == 3 && $out == *"bunq-queue[postgres]"* && $out != *Traceback* ]] \
        || die "a missing extra should exit 3 naming it; got $code: $out"
    echo "ok: missing extra -> exit 3: $out"
}

# install_chromium: Debian's chromium for the dashboard's browser tests (no browser download).
install_chromium() {
    command -v chromium >/dev/null && return 0
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
        || die "cannot install chromium (tests/browser needs it)"
}

# check_dist DIR: the sdist carries the sources and files a build needs; the wheel carries
# the compiled core, the stubs and py.typed, and no tests.
check_dist() {
    local sdist wheel stree wtree f
    sdist=$(ls "$1"/bunq_queue-*.tar.gz) && wheel=$(ls "$1"/bunq_queue-*.whl) || die "no sdist/wheel in $1"
    stree=$(tar -tzf "$sdist")  # listed once: `tar | grep -q` would die of SIGPIPE under pipefail
    wtree=$(zip_names "$wheel")
    for f in LICENSE CHANGELOG.md Makefile template.yaml bunq/_core/heap.pyx bunq/_core/heap.pxd \
             handlers/aws_lambda.py bunq/server/dashboard/index.html bunq/server/dashboard/app.js; do
        grep -q "/$f$" <<<"$stree" || die "the sdist lacks $f"
    done
    for f in 'bunq/py.typed' 'bunq/_core/heap.pyi' 'bunq/_core/heap\..*\.so' 'licenses/LICENSE' \
             'bunq/server/dashboard/index.html' 'bunq/server/dashboard/app.js' 'bunq/server/dashboard/style.css'; do
        grep -Eq "$f" <<<"$wtree" || die "the wheel lacks $f"
    done
    # (the .pyx stay in the wheel: Cython's tracebacks show their lines)
    if grep -Eq '^tests/|^handlers/|\.c$' <<<"$wtree"; then die "the wheel carries files it should not"; fi
    echo "ok: $(basename "$sdist"), $(basename "$wheel")"
}

# dev_pin NAME: NAME's requirement as the dev extra pins it (e.g. "tox>=4").
dev_pin() {
    "$PY" -c 'import sys, tomllib, re
dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]
print(next(d for d in dev if re.split("[<>=!~ ]", d)[0] == sys.argv[1]))' "$1"
}

# claimed_pythons: the tox environments (py310,py311,...) of the Python versions the
# classifiers claim; dies unless tox.ini's env_list has exactly those and requires-python
# names the lowest.
claimed_pythons() {
    "$PY" - <<'PYEOF' || die "tox.ini, classifiers and requires-python disagree on the Pythons"
import configparser, re, sys, tomllib
meta = tomllib.load(open("pyproject.toml", "rb"))["project"]
claimed = sorted({c.rsplit(":: ", 1)[1] for c in meta["classifiers"]
                  if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)},
                 key=lambda v: tuple(map(int, v.split("."))))
envs = ["py" + v.replace(".", "") for v in claimed]
ini = configparser.ConfigParser()
ini.read("tox.ini")
listed = [e for e in re.split(r"[,\s]+", ini["tox"]["env_list"]) if re.fullmatch(r"py\d+", e)]
lowest = re.search(r">=\s*([\d.]+)", meta["requires-python"]).group(1)
if listed != envs or claimed[0] != lowest:
    sys.exit(f"classifiers {claimed}, tox env_list {listed}, requires-python >={lowest}")
print(",".join(envs))
PYEOF
}
