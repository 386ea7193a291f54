#!/usr/bin/env bash
# A one-node SLURM cluster on this machine for the submitit_slurm sweep test: munge, slurmctld
# and slurmd on localhost, with accounting (slurmdbd on MariaDB) so `sacct`, which submitit polls,
# answers. Debian's slurm-wlm, slurmdbd, munge and mariadb-server. Idempotent: exits at once when
# the cluster already answers; `.ci/slurm_up.sh down` stops the daemons it started.
# Installs the packages when apt-get is available and they are missing (needs root).
set -euo pipefail

CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
STATE=/var/spool/slurm-ci
DB_PASS=slurm-ci-only  # a database on localhost for this throwaway cluster
MARK="# written by .ci/slurm_up.sh"

stop_slurm() {
  for daemon in slurmd slurmctld slurmdbd; do
    if [ -f "$STATE/$daemon.pid" ]; then
      kill "$(cat "$STATE/$daemon.pid")" 2>/dev/null || true
      rm -f "$STATE/$daemon.pid"
    fi
  done
}

stop() {
  stop_slurm
  if [ -f "$STATE/mariadb.started" ]; then  # only a MariaDB this script started
    mariadb-admin shutdown 2>/dev/null || true
    rm -f "$STATE/mariadb.started"
  fi
  if [ -f "$STATE/munged.started" ]; then  # likewise munged
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
    rm -f "$STATE/munged.started"
  fi
}

if [ "${1:-up}" = down ]; then stop; exit 0; fi

if [ "$(id -u)" -ne 0 ]; then
  echo "error: .ci/slurm_up.sh starts system daemons and must run as root" >&2; exit 1
fi
PACKAGES="slurm-wlm slurmdbd munge mariadb-server"
if ! command -v slurmctld >/dev/null || ! command -v slurmdbd >/dev/null \
  || ! command -v munged >/dev/null || ! command -v mariadbd >/dev/null; then
  command -v apt-get >/dev/null || { echo "error: install $PACKAGES" >&2; exit 1; }
  apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PACKAGES >/dev/null
fi

# munge: the key the package generated, the daemon as its own user.
mkdir -p /run/munge && chown munge:munge /run/munge
if ! munge -n </dev/null >/dev/null 2>&1; then
  [ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey --create
  # --force: a stale pid file or socket from an earlier munged must not stop this one.
  runuser -u munge -- /usr/sbin/munged --force
  mkdir -p "$STATE" && touch "$STATE/munged.started"
  munge -n </dev/null | unmunge >/dev/null \
    || { echo "error: munged did not start (see /var/log/munge/munged.log)" >&2; exit 1; }
fi

# Already up (node idle or busy): nothing to do.
if [ -f "$CONF" ] && grep -q "$MARK" "$CONF" && timeout 5 sinfo -h -o %T 2>/dev/null \
  | grep -qE '^(idle|mixed|allocated)'; then
  echo "slurm: cluster already up"; exit 0
fi
if [ -f "$CONF" ] && ! grep -q "$MARK" "$CONF"; then
  echo "error: $CONF exists and was not written by this script; not touching it" >&2; exit 1
fi

stop_slurm
mkdir -p "$STATE/ctld" "$STATE/d"

# MariaDB for slurmdbd (Debian's package has initialised /var/lib/mysql).
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
if ! mariadb-admin ping >/dev/null 2>&1; then
  /usr/sbin/mariadbd --user=mysql --skip-networking=0 --bind-address=127.0.0.1 \
    >"$STATE/mariadb.log" 2>&1 &
  touch "$STATE/mariadb.started"
  for _ in $(seq 60); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
cat >"$DBD_CONF" <<CONF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
CONF
chmod 600 "$DBD_CONF"
/usr/sbin/slurmdbd
for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
# The node as slurmd sees it (CPUs, sockets, memory), reachable on 127.0.0.1.
node="$(slurmd -C | head -1) NodeAddr=127.0.0.1 State=UNKNOWN"
host="$(hostname -s)"
cat >"$CONF" <<CONF
$MARK
ClusterName=ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
MpiDefault=none
MailProg=/bin/true
$node
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

sacctmgr -i add cluster ci >/dev/null 2>&1 || true  # exists already on a second start
/usr/sbin/slurmctld
/usr/sbin/slurmd
for _ in $(seq 60); do
  if timeout 2 sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "slurm: one-node cluster up ($host)"; exit 0
  fi
  sleep 0.5
done
echo "error: slurm did not come up; see $STATE/slurmctld.log and $STATE/slurmd.log" >&2
tail -n 20 "$STATE/slurmctld.log" "$STATE/slurmd.log" >&2 || true
exit 1
