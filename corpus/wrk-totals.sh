# Sourced by the load scripts: `wrk_totals FILE` reads the report of a wrk
# run that was interrupted (SIGINT) and sets `requests`, `non2xx` (0 when wrk
# printed none) and `sockerr` (wrk's "Socket errors" line, or "none").
wrk_totals() {
  requests=$(awk '/requests in/ {print $1}' "$1")
  non2xx=$(awk -F': ' '/Non-2xx/ {print $2}' "$1"); non2xx="${non2xx:-0}"
  sockerr=$(awk '/Socket errors/ {print}' "$1"); sockerr="${sockerr:-none}"
}
