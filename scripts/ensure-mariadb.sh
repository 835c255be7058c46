#!/usr/bin/env bash
# Make sure a local MariaDB runs and has what the tests need:
#   - database surge_test (utf8mb4)
#   - user surge@127.0.0.1 and surge@localhost (password surge) with ALL on
#     `surge\_%`.* (so tests can CREATE/DROP per-run surge_test_<x> databases)
#
# Installs mariadb-server/mariadb-client with apt if missing; initialises an
# empty datadir; starts the server if it does not answer; waits for it; then
# sets up database and user through the socket as root. Idempotent (re-running
# also resets the user's password to the configured one).
# On success prints one line, usable with eval:
#   SURGE_TEST_MYSQL_DSN='surge:surge@tcp(127.0.0.1:3306)/surge_test?parseTime=true&multiStatements=true' # ...
#
# Environment:
#   SURGE_TEST_MYSQL_USER      test user                      (default surge)
#   SURGE_TEST_MYSQL_PASSWORD  its password                   (default surge)
#   SURGE_TEST_MYSQL_DB        test database                  (default surge_test)
#   SURGE_TEST_MYSQL_PORT      TCP port, for check and DSN    (default 3306)
#   SURGE_MYSQL_SOCKET         server socket                  (default: from my.cnf, else /run/mysqld/mysqld.sock)
#   SURGE_MYSQL_ROOT_USER      admin account over the socket  (default root)
#   SURGE_MYSQL_ROOT_PASSWORD  its password                   (default empty: unix_socket auth)
#   SURGE_MYSQL_WAIT           seconds to wait for the server (default 30)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

user=${SURGE_TEST_MYSQL_USER:-surge}
pass=${SURGE_TEST_MYSQL_PASSWORD:-surge}
db=${SURGE_TEST_MYSQL_DB:-surge_test}
port=${SURGE_TEST_MYSQL_PORT:-3306}
root_user=${SURGE_MYSQL_ROOT_USER:-root}
root_pass=${SURGE_MYSQL_ROOT_PASSWORD:-}
wait_s=${SURGE_MYSQL_WAIT:-30}
start_log=/tmp/surge-mariadbd.log
check_uint SURGE_TEST_MYSQL_PORT "$port"
check_uint SURGE_MYSQL_WAIT "$wait_s"
[[ $user =~ ^[A-Za-z0-9_]{1,32}$ ]] || die "SURGE_TEST_MYSQL_USER must match [A-Za-z0-9_]{1,32}, got '$user'"
[[ $db =~ ^[A-Za-z0-9_]{1,64}$ ]] || die "SURGE_TEST_MYSQL_DB must match [A-Za-z0-9_]{1,64}, got '$db'"
[ -n "$pass" ] || die "SURGE_TEST_MYSQL_PASSWORD must not be empty"

find_server() {
	local b
	for b in mariadbd mysqld; do
		if command -v "$b" >/dev/null 2>&1; then
			command -v "$b"
			return
		elif [ -x "/usr/sbin/$b" ]; then
			echo "/usr/sbin/$b"
			return
		fi
	done
}

first_cmd() {
	local c
	for c in "$@"; do
		if command -v "$c" >/dev/null 2>&1; then
			echo "$c"
			return
		fi
	done
}

server=$(find_server)
client=$(first_cmd mariadb mysql)
admin=$(first_cmd mariadb-admin mysqladmin)
if [ -z "$server" ] || [ -z "$client" ] || [ -z "$admin" ]; then
	apt_install mariadb-server mariadb-client
	server=$(find_server)
	client=$(first_cmd mariadb mysql)
	admin=$(first_cmd mariadb-admin mysqladmin)
	if [ -z "$server" ] || [ -z "$client" ] || [ -z "$admin" ]; then
		die "mariadbd / mariadb / mariadb-admin still missing after apt-get install"
	fi
fi

# Server settings as the server itself will read them from my.cnf.
server_opt() {
	{ my_print_defaults --mysqld 2>/dev/null || true; } | sed -n "s/^--$1=//p" | tail -n 1
}
socket=${SURGE_MYSQL_SOCKET:-$(server_opt socket)}
socket=${socket:-/run/mysqld/mysqld.sock}

# `mysqladmin ping` exits 0 whenever the server runs, even if access is denied.
alive() {
	"$admin" --no-defaults --protocol=socket --socket="$socket" --connect-timeout=2 ping >/dev/null 2>&1
}

how="already running"
if ! alive; then
	can_root || die "MariaDB is not answering on $socket and starting it needs root or passwordless sudo"
	as_root mkdir -p "$(dirname "$socket")"
	as_root chown mysql:mysql "$(dirname "$socket")"
	datadir=$(server_opt datadir)
	datadir=${datadir:-/var/lib/mysql}
	if ! as_root test -d "$datadir/mysql"; then
		install_db=$(first_cmd mariadb-install-db mysql_install_db)
		[ -n "$install_db" ] || die "datadir $datadir is uninitialised and mariadb-install-db is missing"
		: >"$start_log"
		run_logged "$start_log" as_root "$install_db" --user=mysql --datadir="$datadir" \
			--auth-root-authentication-method=socket --skip-test-db
		how="initialised $datadir, "
	else
		how=""
	fi
	# --user=mysql: Debian's default my.cnf leaves `user` commented out, and
	# mariadbd refuses to run as root. Output lands in $start_log unless my.cnf
	# sets log-error.
	as_root start-stop-daemon --start --oknodo --quiet --background \
		--output "$start_log" --exec "$server" -- --user=mysql ||
		die "start-stop-daemon could not start $server"
	if ! wait_until "$wait_s" alive; then
		errlog=$(server_opt log-error)
		for f in "$start_log" ${errlog:+"$errlog"}; do
			[ -s "$f" ] || continue
			echo "--- last lines of $f ---" >&2
			tail -n 15 "$f" >&2 || true
		done
		die "started $server but it did not answer on $socket within ${wait_s}s"
	fi
	how="${how}started"
fi

# SQL string literal (backslash and quote escaped).
sql_str() {
	printf "'%s'" "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g")"
}

# root_sql SQL: run SQL as the admin account through the socket.
root_sql() {
	local rc=0 out
	if [ "$(id -u)" -eq 0 ]; then
		out=$(MYSQL_PWD=$root_pass "$client" --no-defaults --protocol=socket --socket="$socket" \
			-u"$root_user" --batch --skip-column-names -e "$1" 2>&1) || rc=$?
	elif can_root; then
		out=$(sudo -n env MYSQL_PWD="$root_pass" "$client" --no-defaults --protocol=socket --socket="$socket" \
			-u"$root_user" --batch --skip-column-names -e "$1" 2>&1) || rc=$?
	else
		die "setting up database and user needs root (socket auth as $root_user)"
	fi
	[ "$rc" -eq 0 ] || die "as $root_user via $socket: $out"
	printf '%s\n' "$out"
}

u=$(sql_str "$user")
p=$(sql_str "$pass")
charset=$(root_sql "SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = $(sql_str "$db")")
sql="CREATE DATABASE IF NOT EXISTS \`$db\` CHARACTER SET utf8mb4;"
if [ -n "$charset" ] && [ "$charset" != utf8mb4 ]; then
	sql+="ALTER DATABASE \`$db\` CHARACTER SET utf8mb4;"
fi
for host in 127.0.0.1 localhost; do
	h=$(sql_str "$host")
	sql+="CREATE USER IF NOT EXISTS $u@$h IDENTIFIED BY $p;"
	sql+="ALTER USER $u@$h IDENTIFIED BY $p;"
	sql+="GRANT ALL PRIVILEGES ON \`surge\\_%\`.* TO $u@$h;"
	case $db in
	surge_*) ;; # covered by the wildcard grant
	*) sql+="GRANT ALL PRIVILEGES ON \`${db//_/\\_}\`.* TO $u@$h;" ;;
	esac
done
root_sql "$sql" >/dev/null

# Verify as the test user over TCP, like the tests will connect.
as_user() {
	MYSQL_PWD=$pass "$client" --no-defaults --protocol=tcp -h127.0.0.1 -P"$port" -u"$user" \
		--batch --skip-column-names --connect-timeout=5 "$@" 2>&1
}
out=$(as_user -e 'select 1') || die "cannot log in as $user over TCP 127.0.0.1:$port: $out"
[ "$out" = 1 ] || die "unexpected reply from 'select 1' as $user: $out"
out=$(as_user "$db" -e 'select 1') || die "$user cannot use database $db: $out"
probe="surge_test_probe_$$"
out=$(as_user -e "CREATE DATABASE \`$probe\`; DROP DATABASE \`$probe\`;") ||
	die "$user cannot create/drop per-run databases like $probe: $out"

version=$(as_user -e 'select version()')
dsn="$user:$pass@tcp(127.0.0.1:$port)/$db?parseTime=true&multiStatements=true"
echo "SURGE_TEST_MYSQL_DSN=$(shell_quote "$dsn") # mariadb $version, $how"
