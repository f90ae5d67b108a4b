#!/usr/bin/env bash
# Print a CRS configuration for a CRS checkout and a paranoia level: the
# engine settings ModSecurity recommends, the body-processor rules, CRS's
# setup file, the paranoia level, then CRS's rules.
#
#   corpus/crs-config.sh [CRS_DIR [PL]] > /tmp/crs-pl1.conf
#   waf eval -c /tmp/crs-pl1.conf --corpus reqs.jsonl --out ours.jsonl
#
# CRS_DIR defaults to ../shared/crs (beside this repo), PL to 1. Only the CRS
# checkout is needed. The text is the one the peer harnesses of ../shared/peers
# load (`coraza-peer --crs CRS_DIR --pl PL --dump-config`, for an absolute
# CRS_DIR), so that decisions compare line for line; corpus/run.sh checks that
# the two stay byte-identical.
#
# With --deploy (anywhere among the arguments), for putting in front of an
# application rather than comparing engines: two more rules, as ModSecurity's
# recommended configuration has them, deny (400) a request body its parser
# could not read (REQBODY_ERROR, 200002) or a multipart body that failed the
# strict checks (MULTIPART_STRICT_ERROR, 200003). Without them such a body
# (a multipart `Content-Type` with `charset=` before `boundary=`, which
# applications parse) reaches the application with none of its values
# inspected; `waf lint` warns about a configuration that lacks the first.
#
#   corpus/crs-config.sh ../shared/crs 1 --deploy > /etc/waf/crs-pl1.conf
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deploy=0
args=()
for a in "$@"; do
  if [[ "$a" == --deploy ]]; then deploy=1; else args+=("$a"); fi
done
crs="${args[0]:-$here/../../shared/crs}"
pl="${args[1]:-1}"

if [[ ! -f "$crs/crs-setup.conf.example" || ! -d "$crs/rules" ]]; then
  echo "crs-config.sh: $crs is not a CRS directory (crs-setup.conf.example, rules/)" >&2
  exit 2
fi
if ! [[ "$pl" =~ ^[1-4]$ ]]; then
  echo "crs-config.sh: paranoia level must be 1..4, got '$pl'" >&2
  exit 2
fi
crs="$(cd "$crs" && pwd)"

cat <<CONF
SecRuleEngine On
SecRequestBodyAccess On
SecResponseBodyAccess Off
SecRequestBodyLimit 13107200
SecRequestBodyNoFilesLimit 131072
SecRequestBodyLimitAction Reject
SecAuditEngine Off
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "^application/[a-z0-9.-]+[+]json" "id:200006,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
CONF
if [[ "$deploy" == 1 ]]; then
  cat <<'CONF'
SecRule REQBODY_ERROR "!@eq 0" "id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body.',logdata:'%{reqbody_error_msg}',severity:2"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" "id:200003,phase:2,t:none,log,deny,status:400,msg:'Multipart request body failed strict validation.'"
CONF
fi
cat <<CONF
Include $crs/crs-setup.conf.example
SecAction "id:900000,phase:1,pass,t:none,nolog,tag:'OWASP_CRS',setvar:tx.blocking_paranoia_level=$pl"
SecAction "id:900001,phase:1,pass,t:none,nolog,tag:'OWASP_CRS',setvar:tx.detection_paranoia_level=$pl"
Include $crs/rules/*.conf
CONF
