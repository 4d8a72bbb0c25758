#!/usr/bin/env bash
# A throwaway Waybill cluster on this machine: PostgreSQL + Redis + two `waybill serve` nodes behind
# nginx on one port, seeded with the demo company. Everything lives in .cluster/ (git-ignored; as root
# in a clone other users cannot enter, /tmp/waybill-cluster-PORT).
#
#   scripts/cluster.sh up              start everything, print where to look, wait; Ctrl-C stops and cleans up
#   scripts/cluster.sh start-all       the same without waiting (tools: scripts/bench.sh cluster); `down` stops it
#   scripts/cluster.sh down            stop everything started by `up` and delete .cluster/
#   scripts/cluster.sh status          what runs, with pids and ports
#   scripts/cluster.sh kill redis|node1|node2|postgres     kill one part (SIGKILL; PostgreSQL: immediate stop)
#   scripts/cluster.sh stop node1|node2                    stop a node as a deploy does (SIGTERM, waits for its exit)
#   scripts/cluster.sh start redis|node1|node2|postgres    start it again on the same port
#   scripts/cluster.sh cut node2       cut node 2 off from PostgreSQL and Redis: packets dropped, nothing
#                                      refused (a cluster started with WAYBILL_CLUSTER_NETNS=1); `heal node2` joins it again
#
# Ports (override with the environment): WAYBILL_CLUSTER_PORT (nginx, 8080), node ports +1 and +2,
# PostgreSQL 25432, Redis 26379 (below 32768: never in the kernel's ephemeral range).
#
# WAYBILL_CLUSTER_NETNS=1 (root, `ip` and `tc` from iproute2) at `up` or `start-all`: node 2 runs in a
# network namespace of its own, reached by nginx and clients over one virtual link (10.231.1.2) and
# reaching PostgreSQL and Redis over another (10.231.2.1), so that `cut node2` can drop its database
# traffic while it stays reachable: a network partition, which a killed or stopped process is not
# (connections hang instead of being refused). The cut drops every packet on both ends of that link
# (a queue of length 0), which stays up with its routes, and neither end asks for the other's
# hardware address (fixed entries): nothing is refused or reported unreachable, as when a switch
# between them dies. The namespace is waybill-PORT; later commands find it noted in the state folder.
set -euo pipefail
# Debian installs nginx in /usr/sbin, which is not on a normal user's PATH.
PATH="$PATH:/usr/sbin"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LB_PORT="${WAYBILL_CLUSTER_PORT:-8080}"
# As root, PostgreSQL runs as `postgres` and nginx's workers as `nobody`: neither can enter a
# clone in a folder only root may enter (Debian's /root is 0700), so the state goes to /tmp then.
default_state="$ROOT/.cluster"
if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1 && ! runuser -u postgres -- test -x "$ROOT"; then
    default_state="/tmp/waybill-cluster-$LB_PORT"
fi
STATE="${WAYBILL_CLUSTER_DIR:-$default_state}"
# A name in /tmp anyone can guess: never follow another user's folder or link there.
if [ "$STATE" = "/tmp/waybill-cluster-$LB_PORT" ] && { [ -L "$STATE" ] || { [ -e "$STATE" ] && [ "$(stat -c %u "$STATE")" != 0 ]; }; }; then
    echo "cluster: $STATE exists and is not root's own folder; remove it or set WAYBILL_CLUSTER_DIR" >&2
    exit 1
fi
PG_PORT="${WAYBILL_CLUSTER_PG_PORT:-25432}"
REDIS_PORT="${WAYBILL_CLUSTER_REDIS_PORT:-26379}"
DB_URL="postgresql://waybill@127.0.0.1:$PG_PORT/waybill"
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
BIN="${WAYBILL_BIN:-}"
# Set for `up`/`start-all`; later commands read what the running cluster was started with.
NETNS="${WAYBILL_CLUSTER_NETNS:-$(cat "$STATE/netns" 2>/dev/null || true)}"
NS="waybill-$LB_PORT"
# Interface names (at most 15 bytes): the client link and the database link, host side and node side.
CLIENT_LINK="wbc$LB_PORT" DB_LINK="wbd$LB_PORT"
NODE2_ADDR=10.231.1.2 PROXY_ADDR=10.231.1.1 DB_ADDR=10.231.2.1

node_port() { echo $((LB_PORT + $1)); }
# Where node N listens (and nginx and clients reach it).
node_host() { if [ "$1" = 2 ] && [ -n "$NETNS" ]; then echo "$NODE2_ADDR"; else echo 127.0.0.1; fi; }

# Node 2's namespace and its two links (see the header). Idempotent.
make_netns() {
    [ "$(id -u)" = 0 ] || die "WAYBILL_CLUSTER_NETNS=1 needs root (network namespaces)"
    command -v ip >/dev/null || die "WAYBILL_CLUSTER_NETNS=1 needs ip (iproute2)"
    command -v tc >/dev/null || die "WAYBILL_CLUSTER_NETNS=1 needs tc (iproute2)"
    remove_netns  # what a run that failed half-way left
    ip netns add "$NS"
    ip -n "$NS" link set lo up
    local link host node
    for link in "$CLIENT_LINK:10.231.1" "$DB_LINK:10.231.2"; do
        host="${link%%:*}" node="${link%%:*}n"
        ip link add "$host" type veth peer name "$node"
        ip link set "$node" netns "$NS"
        ip addr add "${link#*:}.1/30" dev "$host"
        ip -n "$NS" addr add "${link#*:}.2/30" dev "$node"
        ip link set "$host" up
        ip -n "$NS" link set "$node" up
        # Each end knows the other's hardware address: a cut link asks nobody, so nothing reports
        # the other end unreachable.
        ip neigh replace "${link#*:}.2" lladdr "$(ip -n "$NS" -br link show "$node" | awk '{print $3}')" dev "$host" nud permanent
        ip -n "$NS" neigh replace "${link#*:}.1" lladdr "$(ip -br link show "$host" | awk '{print $3}')" dev "$node" nud permanent
    done
    echo 1 >"$STATE/netns"
}

remove_netns() {
    [ -e "/run/netns/$NS" ] && ip netns del "$NS" 2>/dev/null  # takes the node sides, and with them both pairs
    ip link del "$CLIENT_LINK" 2>/dev/null || true
    ip link del "$DB_LINK" 2>/dev/null || true
}

# cut/heal node2: every packet on either end of the database link dropped (a queue of length 0), or
# the link as it was. The link stays up and keeps its routes: open connections hang until their
# own timeouts, new ones time out.
set_db_link() {
    [ -n "$NETNS" ] || die "cut and heal need a cluster started with WAYBILL_CLUSTER_NETNS=1"
    if [ "$1" = cut ]; then
        tc qdisc replace dev "$DB_LINK" root pfifo limit 0
        ip netns exec "$NS" tc qdisc replace dev "${DB_LINK}n" root pfifo limit 0
    else
        tc qdisc del dev "$DB_LINK" root 2>/dev/null || true
        ip netns exec "$NS" tc qdisc del dev "${DB_LINK}n" root 2>/dev/null || true
    fi
}

die() { echo "cluster: $*" >&2; exit 1; }

pg_bin() {
    local dir
    dir="$(pg_config --bindir 2>/dev/null || true)"
    [ -x "$dir/pg_ctl" ] || dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
    [ -x "$dir/pg_ctl" ] || die "PostgreSQL is not installed (scripts/install-deps.sh --cluster installs it)"
    echo "$dir"
}

# PostgreSQL refuses to run as root: run its tools as the postgres user then.
as_pg() { if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi; }  # from /: the cwd may be root-only

wait_for() {  # wait_for SECONDS COMMAND… : polls every 0.1 s
    local tries=$(($1 * 10)); shift
    for _ in $(seq 1 "$tries"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}

start_postgres() {
    local bin; bin="$(pg_bin)"
    if [ ! -d "$STATE/pg/data" ]; then
        mkdir -p "$STATE/pg"
        [ "$(id -u)" = 0 ] && chown -R postgres: "$STATE/pg"
        as_pg "$bin/initdb" -D "$STATE/pg/data" -A trust -U waybill --no-sync >"$STATE/pg/initdb.log" 2>&1 \
            || die "initdb failed, see $STATE/pg/initdb.log"
        # Node 2 in its namespace connects from the database link's other end.
        [ -n "$NETNS" ] && echo "host all all 10.231.2.0/30 trust" >>"$STATE/pg/data/pg_hba.conf"
    fi
    as_pg "$bin/pg_ctl" -D "$STATE/pg/data" -l "$STATE/pg/server.log" -w -t 20 \
        -o "-p $PG_PORT -k $STATE/pg -c listen_addresses=127.0.0.1${NETNS:+,$DB_ADDR} -c fsync=on ${WAYBILL_CLUSTER_PG_OPTIONS:-}" start >/dev/null \
        || die "PostgreSQL did not start, see $STATE/pg/server.log"
    as_pg "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U waybill -d postgres -qtAc \
        "SELECT 1 FROM pg_database WHERE datname = 'waybill'" | grep -q 1 \
        || as_pg "$bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U waybill waybill
}

stop_postgres() {
    [ -f "$STATE/pg/data/postmaster.pid" ] || return 0
    as_pg "$(pg_bin)/pg_ctl" -D "$STATE/pg/data" -m fast -w stop >/dev/null 2>&1 || true
}

kill_postgres() {
    # An immediate stop is a crash as clients see it: every backend dies, nothing is flushed
    # gracefully, and the next start runs crash recovery (a SIGKILLed postmaster would leave
    # orphan backends holding shared memory, and a start would refuse to run).
    [ -f "$STATE/pg/data/postmaster.pid" ] || return 0
    as_pg "$(pg_bin)/pg_ctl" -D "$STATE/pg/data" -m immediate -w stop >/dev/null 2>&1 || true
}

start_redis() {
    mkdir -p "$STATE/redis"
    # Reached from node 2's namespace too: Redis's protected mode takes only loopback clients.
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 ${NETNS:+$DB_ADDR --protected-mode no} --save "" --appendonly no --dir "$STATE/redis" \
        --daemonize no >"$STATE/redis/server.log" 2>&1 &
    echo $! >"$STATE/redis.pid"
    wait_for 10 redis-cli -p "$REDIS_PORT" ping || die "Redis did not start, see $STATE/redis/server.log"
}

start_node() {  # start_node N
    local n=$1 port host; port="$(node_port "$1")" host="$(node_host "$1")"
    if [ "$host" = 127.0.0.1 ]; then
        "$BIN" serve --host 127.0.0.1 --port "$port" --node-id "node$n" --trusted-proxy 127.0.0.1 \
            --database-url "$DB_URL" --redis-url "$REDIS_URL" >>"$STATE/node$n.log" 2>&1 &
    else
        # `ip netns exec` execs the node: the pid is the node's. /metrics answers only loopback
        # clients unless a token is set: nginx and the tools reach this node over its link.
        [ -f "$STATE/metrics-token" ] || head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$STATE/metrics-token"
        WAYBILL_METRICS_TOKEN="$(cat "$STATE/metrics-token")" \
            ip netns exec "$NS" "$BIN" serve --host "$host" --port "$port" --node-id "node$n" --trusted-proxy "$PROXY_ADDR" \
            --database-url "postgresql://waybill@$DB_ADDR:$PG_PORT/waybill" --redis-url "redis://$DB_ADDR:$REDIS_PORT" \
            >>"$STATE/node$n.log" 2>&1 &
    fi
    echo $! >"$STATE/node$n.pid"
    wait_for 20 while_alive "$(cat "$STATE/node$n.pid")" curl -sf "http://$host:$port/readyz" \
        || die "node$n did not become ready, see $STATE/node$n.log"
}

write_nginx_conf() {
    mkdir -p "$STATE/nginx"
    cat >"$STATE/nginx/nginx.conf" <<EOF
# Generated by scripts/cluster.sh: a load balancer in front of two Waybill nodes.
daemon off;
worker_processes 1;
pid $STATE/nginx/nginx.pid;
error_log $STATE/nginx/error.log warn;
events { worker_connections 4096; }
http {
    # Query strings are never logged: a WebSocket URL may carry a ticket or token.
    log_format waybill '\$remote_addr [\$time_local] "\$request_method \$uri" \$status \$request_time \$upstream_addr';
    access_log $STATE/nginx/access.log waybill;
    client_body_temp_path $STATE/nginx/body;
    proxy_temp_path $STATE/nginx/proxy;
    fastcgi_temp_path $STATE/nginx/fastcgi;
    uwsgi_temp_path $STATE/nginx/uwsgi;
    scgi_temp_path $STATE/nginx/scgi;
    # '' (not close) for a plain request: the upstream keep-alive below then works.
    map \$http_upgrade \$connection_upgrade { default upgrade; '' ''; }
    upstream waybill {
        server 127.0.0.1:$(node_port 1) max_fails=1 fail_timeout=3s;
        server $(node_host 2):$(node_port 2) max_fails=1 fail_timeout=3s;
        keepalive 32;
        # Below the nodes' 5 s: nginx closes an idle connection before a node would, so it never
        # sends a request on one the node is closing (a write would get 502, not resent).
        keepalive_timeout 4s;
    }
    server {
        listen 127.0.0.1:$LB_PORT;
        client_max_body_size 1m;
        proxy_http_version 1.1;
        proxy_set_header Host \$host;
        proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
        # A dead node: retry idempotent requests on the other one. nginx never retries POST or PATCH,
        # but it does retry DELETE (idempotent in HTTP): one whose first try committed answers 404
        # from the other node, which the panel shows as "gone" (docs/SCALING.md).
        # Not on a 503: that is the shared store's, every node answers the same, and counting it
        # marks every node down (nginx then answers its own 502).
        proxy_next_upstream error timeout;
        proxy_connect_timeout 2s;
        # Every proxy_set_header here, none in the locations: a location that sets one inherits
        # none of these (nodes then saw no client address and a Host of "waybill").
        proxy_set_header Upgrade \$http_upgrade;
        proxy_set_header Connection \$connection_upgrade;
        location /ws/ {
            proxy_pass http://waybill;
            # WebSockets stay open for hours; the server pings every 25 s.
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }
        location / {
            proxy_pass http://waybill;
            # Every answer comes within 5 s (SPEC §6): a frozen node's GET goes to the other one,
            # a write gets 504 (docs/SCALING.md, the frozen node). With 1h it waited an hour.
            proxy_read_timeout 6s;
        }
    }
}
EOF
}

start_nginx() {
    write_nginx_conf
    nginx -c "$STATE/nginx/nginx.conf" -p "$STATE/nginx" >"$STATE/nginx/stdout.log" 2>&1 &
    echo $! >"$STATE/nginx.pid"
    wait_for 10 while_alive "$(cat "$STATE/nginx.pid")" curl -sf "http://127.0.0.1:$LB_PORT/healthz" \
        || die "nginx did not start, see $STATE/nginx/error.log"
}

kill_pidfile() {  # kill_pidfile NAME SIGNAL
    local file="$STATE/$1.pid"
    [ -f "$file" ] || return 0
    kill "-$2" "$(cat "$file")" 2>/dev/null || true
    rm -f "$file"
}

stop_node() {  # stop_node NAME: SIGTERM, then wait (up to 20 s) for the drain to end, then SIGKILL
    local file="$STATE/$1.pid" pid
    [ -f "$file" ] || return 0
    pid="$(cat "$file")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "cluster: $1 did not stop within 20 s of SIGTERM: killed" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

build() {
    if [ -z "$BIN" ]; then
        ("$ROOT/scripts/build-release.sh" >/dev/null) || die "build failed"
        BIN="$(cd "$ROOT" && swift build -c release --show-bin-path)/waybill"
    fi
    [ -x "$BIN" ] || die "no waybill binary at $BIN"
}

# Stops every process of the cluster, keeping its state folder (logs) for `down` to remove.
stop_processes() {
    kill_pidfile nginx TERM
    kill_pidfile node1 TERM
    kill_pidfile node2 TERM
    kill_pidfile redis TERM
    stop_postgres
    remove_netns  # whether or not this cluster made it: nothing of an earlier run stays behind
    sleep 0.3
}

down() {
    stop_processes
    rm -rf "$STATE"
}

# Whether something answers on 127.0.0.1:PORT.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Runs COMMAND… only while PID lives: a readiness check must not pass on another program that
# answers on the same port (`make run`'s demo on 8080 answered nginx's check).
while_alive() { local pid=$1; shift; kill -0 "$pid" 2>/dev/null && "$@"; }

status() {
    for part in nginx node1 node2 redis; do
        local file="$STATE/$part.pid"
        if [ -f "$file" ] && kill -0 "$(cat "$file")" 2>/dev/null; then echo "$part: running (pid $(cat "$file"))"
        else echo "$part: stopped"; fi
    done
    if [ -f "$STATE/pg/data/postmaster.pid" ] && kill -0 "$(head -1 "$STATE/pg/data/postmaster.pid")" 2>/dev/null; then
        echo "postgres: running (pid $(head -1 "$STATE/pg/data/postmaster.pid"), port $PG_PORT)"
    else echo "postgres: stopped"; fi
}

start_all() {
    command -v nginx >/dev/null || die "nginx is missing (scripts/install-deps.sh --cluster installs it)"
    command -v redis-server >/dev/null || die "redis-server is missing (scripts/install-deps.sh --cluster)"
    [ -d "$STATE" ] && down
    for port in "$LB_PORT" "$(node_port 1)" "$(node_port 2)" "$PG_PORT" "$REDIS_PORT"; do
        ! port_in_use "$port" || die "port $port is in use (\`make run\`'s demo? WAYBILL_CLUSTER_PORT=N moves the cluster's ports)"
    done
    NETNS="${WAYBILL_CLUSTER_NETNS:-}"  # decided anew, not by an earlier cluster's note
    mkdir -p "$STATE"
    build
    if [ -n "$NETNS" ]; then make_netns; fi
    echo "cluster: starting PostgreSQL on $PG_PORT, Redis on $REDIS_PORT"
    start_postgres
    start_redis
    "$BIN" seed --database-url "$DB_URL" --demo --out "$STATE/seed.json" 2>>"$STATE/seed.log" \
        || die "seeding failed, see $STATE/seed.log"
    echo "cluster: starting node1 on $(node_port 1), node2 on $(node_port 2), nginx on $LB_PORT"
    start_node 1
    start_node 2
    start_nginx
}

up() {
    # From the start: Ctrl-C while it starts stops what started (PostgreSQL runs detached and got
    # no signal; Redis and a node kept their ports), and so does a start that fails, which keeps
    # the logs its message points at (found by a review, 2026-12-07).
    trap 'echo; echo "cluster: stopping"; down; exit 130' INT TERM
    # Only once this run made its state folder (after the port check): before that nothing of
    # its own runs, and `stop_processes` would take down another cluster's network namespace.
    trap '[ ! -d "$STATE" ] || { stop_processes; echo "cluster: stopped what had started; logs are in $STATE (scripts/cluster.sh down removes them)" >&2; }' EXIT
    start_all
    trap - EXIT
    cat <<EOF

Waybill cluster is running (PostgreSQL + Redis + 2 nodes behind nginx).
  Web panel:   http://127.0.0.1:$LB_PORT/        (load-balanced over both nodes)
  Node 1:      http://127.0.0.1:$(node_port 1)/metrics     Node 2: http://$(node_host 2):$(node_port 2)/metrics
  Dispatcher:  dispatcher@demo.example.com / demo-dispatcher
  Drivers:     driver1@demo.example.com … driver3@demo.example.com / demo-driver
  Logs:        $STATE/node1.log  $STATE/node2.log  $STATE/nginx/access.log

Break it from another terminal and watch every change still arrive:
  scripts/cluster.sh kill redis      (then: scripts/cluster.sh start redis)
  scripts/cluster.sh kill node1      (its sockets resume on node2; then: scripts/cluster.sh start node1)
  scripts/cluster.sh stop node1      (a deploy: SIGTERM, nothing refused through nginx; then: start node1)
  scripts/cluster.sh kill postgres   (writes answer 503; then: scripts/cluster.sh start postgres)
Stop with Ctrl-C (everything is stopped and $STATE deleted).
EOF
    trap 'echo; echo "cluster: stopping"; down; exit 0' INT TERM
    while true; do sleep 1; done
}

command="${1:-up}"
case "$command" in
    up) up ;;
    start-all) start_all ;;
    down) down ;;
    status) status ;;
    kill|start|stop|cut|heal)
        part="${2:-}"
        case "$command:$part" in
            cut:node2) set_db_link cut ;;
            heal:node2) set_db_link heal ;;
            cut:*|heal:*) die "usage: scripts/cluster.sh $command node2" ;;
            stop:node1|stop:node2) stop_node "$part" ;;
            kill:redis) kill_pidfile redis KILL ;;
            kill:node1|kill:node2) kill_pidfile "$part" KILL ;;
            kill:postgres) kill_postgres ;;
            start:redis) start_redis ;;
            start:node1|start:node2) build; start_node "${part#node}" ;;
            start:postgres) start_postgres ;;
            stop:*) die "usage: scripts/cluster.sh stop node1|node2" ;;
            *) die "usage: scripts/cluster.sh $command redis|node1|node2|postgres" ;;
        esac
        status ;;
    *) die "usage: scripts/cluster.sh up|start-all|down|status|kill PART|stop PART|start PART|cut node2|heal node2" ;;
esac
