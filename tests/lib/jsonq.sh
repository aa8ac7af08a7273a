# SPDX-License-Identifier: Apache-2.0
# Source me: small JSON and number helpers for the shell tests (python3 for the parsing).
#   field JSON KEY[.KEY]  the value at that path, numbers as Python prints them
#   near A B TOL          exit 0 when |A - B| <= TOL
JSONQ_PY=${JSONQ_PY:-/usr/bin/python3}
[ -x "$JSONQ_PY" ] || JSONQ_PY=python3

field() {
	"$JSONQ_PY" -c 'import json,sys
v=json.loads(sys.argv[1])
for k in sys.argv[2].split("."): v=v[k]
print(v)' "$1" "$2"
}

near() {
	"$JSONQ_PY" -c 'import sys; a,b,t=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b)<=t else 1)' "$@"
}
