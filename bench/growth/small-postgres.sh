#!/usr/bin/env bash
# A Postgres held to little memory, for a growth run that outgrows memory in minutes instead of
# hours: the 20 million messages of `npm run bench:growth` are 72 GB on a 24 GB machine; 2
# million are 7 GB, so the same three to one against 2 GB. Debian's PostgreSQL, as root: a
# second cluster on its own port, started inside a memory cgroup whose limit counts the page
# cache its processes read, so what does not fit is read from disk again, as on the big run.
#
#   bash bench/growth/small-postgres.sh            # 2G, port 5434
#   bash bench/growth/small-postgres.sh 4G 5435
#   DATABASE_URL=postgres://postgres@127.0.0.1:5434/test npm run bench:growth -- --sizes=0.1,2
#   bash bench/growth/small-postgres.sh stop       # stop it and drop the cluster
#
# Its figures are for comparing two commits side by side on the same limit (docs/performance.md,
# "Dedup keys in time order"), not for the sizes.
set -euo pipefail

limit=${1:-2G}
port=${2:-5434}
version=$(ls /etc/postgresql | sort -n | tail -1)
name=small

if [ "$limit" = stop ]; then
  pg_dropcluster --stop "$version" "$name"
  rmdir /sys/fs/cgroup/memory/switchboard-small /sys/fs/cgroup/switchboard-small 2>/dev/null || true
  exit 0
fi

bytes=$(numfmt --from=iec "$limit")
if [ -d /sys/fs/cgroup/memory ]; then
  group=/sys/fs/cgroup/memory/switchboard-small
  mkdir -p "$group"
  echo "$bytes" >"$group/memory.limit_in_bytes"
else
  group=/sys/fs/cgroup/switchboard-small
  mkdir -p "$group"
  echo "$bytes" >"$group/memory.max"
fi

if ! pg_lsclusters -h | awk '{print $2}' | grep -qx "$name"; then
  pg_createcluster "$version" "$name" --port "$port" >/dev/null
  conf=/etc/postgresql/$version/$name
  sed -i "s/^#*listen_addresses.*/listen_addresses = '127.0.0.1'/" "$conf/postgresql.conf"
  printf 'local all all trust\nhost all all 127.0.0.1/32 trust\n' >"$conf/pg_hba.conf"
fi
# the postmaster starts inside the group, and every backend it forks stays there
if pg_lsclusters -h | awk -v n="$name" '$2 == n {print $4}' | grep -qx online; then
  pid=$(head -1 "/var/lib/postgresql/$version/$name/postmaster.pid")
  grep -qx "$pid" "$group/cgroup.procs" || {
    echo "cluster $version/$name runs outside $group: run '$0 stop' first" >&2
    exit 1
  }
else
  sh -c "echo \$\$ > $group/cgroup.procs; exec pg_ctlcluster --skip-systemctl-redirect $version $name start"
fi
until pg_isready -q -h 127.0.0.1 -p "$port"; do sleep 0.2; done
psql -q -h 127.0.0.1 -p "$port" -U postgres -tc "select 1 from pg_database where datname = 'test'" |
  grep -q 1 || psql -q -h 127.0.0.1 -p "$port" -U postgres -c 'create database test'
echo "postgres://postgres@127.0.0.1:$port/test (memory held to $limit)"
