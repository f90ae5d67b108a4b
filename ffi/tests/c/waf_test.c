/* The C ABI from C: rules from a string (and broken rules' diagnostics), a
 * ruleset shared by threads, transactions fed phase by phase with bodies in
 * chunks, interventions in phases 1, 2 and 4, matched rules, the log
 * callback, compressed request bodies, persistent collections handed over
 * a reload, and NULL arguments. Built and run by ffi/tests/c_abi.rs under
 * AddressSanitizer (leaks included). Prints "ok" and exits 0 when all hold. */
#include "waf.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static const char RULES[] =
    "SecRuleEngine On\n"
    "SecRequestBodyAccess On\n"
    "SecResponseBodyAccess On\n"
    "SecResponseBodyMimeType text/html\n"
    "SecRule ARGS \"@contains attack\" \"id:1,phase:2,deny,status:403,log,msg:'attack in %{MATCHED_VAR_NAME}'\"\n"
    "SecRule REQUEST_URI \"@beginsWith /old\" \"id:2,phase:1,redirect:/new,log\"\n"
    "SecRule RESPONSE_BODY \"@contains SECRET\" \"id:3,phase:4,deny,status:502,log\"\n"
    "SecRule REQUEST_HEADERS:User-Agent \"@contains scanner\" \"id:4,phase:1,pass,log,severity:2\"\n";

static void count_line(void *data, const char *line) {
    CHECK(strstr(line, "[id \"") != NULL);
    (*(int *)data)++;
}

static waf_transaction *start(const waf_ruleset *rs, const char *uri, const char *method) {
    waf_transaction *tx = waf_transaction_new(rs);
    CHECK(tx != NULL);
    CHECK(waf_process_connection(tx, "192.0.2.10", 40000, "127.0.0.1", 80) == WAF_OK);
    CHECK(waf_process_uri(tx, (const uint8_t *)uri, strlen(uri), (const uint8_t *)method, strlen(method),
                          (const uint8_t *)"HTTP/1.1", 8) == WAF_OK);
    CHECK(waf_add_request_header(tx, (const uint8_t *)"Host", 4, (const uint8_t *)"example.com", 11) == WAF_OK);
    return tx;
}

static void benign_and_blocked(const waf_ruleset *rs) {
    waf_intervention_t it;
    /* Phase 1 redirect. */
    waf_transaction *tx = start(rs, "/old/page", "GET");
    CHECK(waf_process_request_headers(tx) == WAF_OK);
    CHECK(waf_intervention(tx, &it) == 1);
    CHECK(it.status == 302 && it.rule_id == 2 && it.phase == 1);
    CHECK(strcmp(it.action, "redirect") == 0 && it.url != NULL && strcmp(it.url, "/new") == 0);
    int lines = 0;
    CHECK(waf_transaction_set_log(tx, count_line, &lines) == WAF_OK);
    CHECK(waf_process_logging(tx) == WAF_OK);
    CHECK(lines == 2); /* rule 2, and the intervention */
    waf_transaction_free(tx);

    /* Phase 2: a body in chunks, the attack in the second. */
    tx = start(rs, "/form", "POST");
    CHECK(waf_add_request_header(tx, (const uint8_t *)"Content-Type", 12,
                                 (const uint8_t *)"application/x-www-form-urlencoded", 33) == WAF_OK);
    CHECK(waf_add_request_header(tx, (const uint8_t *)"User-Agent", 10, (const uint8_t *)"scanner 1.0", 11) == WAF_OK);
    lines = 0;
    CHECK(waf_transaction_set_log(tx, count_line, &lines) == WAF_OK);
    CHECK(waf_process_request_headers(tx) == WAF_OK);
    CHECK(lines == 1); /* rule 4's line, given when phase 1 ends */
    CHECK(waf_intervention(tx, &it) == 0);
    bool more = false;
    CHECK(waf_append_request_body(tx, (const uint8_t *)"a=1&b=at", 8, &more) == WAF_OK && more);
    CHECK(waf_append_request_body(tx, (const uint8_t *)"tack", 4, NULL) == WAF_OK);
    CHECK(waf_process_request_body(tx) == WAF_OK);
    CHECK(lines == 3); /* then rule 1's and the intervention's, before the 403 is sent */
    CHECK(waf_intervention(tx, &it) == 1);
    CHECK(it.status == 403 && it.rule_id == 1 && it.phase == 2 && it.url == NULL);
    CHECK(strstr(it.log_line, "[id \"1\"]") != NULL);
    waf_matched_rule_t m[4];
    int n = waf_matched_rules(tx, m, 4);
    CHECK(n == 2);
    CHECK(m[0].id == 4 && m[0].severity == 2 && !m[0].disruptive);
    CHECK(m[1].id == 1 && m[1].disruptive && strcmp(m[1].msg, "attack in ARGS:b") == 0);
    CHECK(waf_matched_rules(tx, NULL, 0) == 2);
    CHECK(waf_transaction_id(tx) != NULL && strlen(waf_transaction_id(tx)) > 0);
    CHECK(waf_transaction_set_id(tx, (const uint8_t *)"req-42", 6) == WAF_OK);
    CHECK(strcmp(waf_transaction_id(tx), "req-42") == 0);
    CHECK(waf_transaction_set_id(tx, NULL, 3) == WAF_ERR_NULL);
    CHECK(waf_process_logging(tx) == WAF_OK);
    CHECK(lines == 3); /* nothing given twice */
    waf_transaction_free(tx);

    /* Phase 4: a response body blocked before it is sent. */
    tx = start(rs, "/page", "GET");
    CHECK(waf_process_request_headers(tx) == WAF_OK);
    CHECK(waf_process_request_body(tx) == WAF_OK);
    CHECK(waf_add_response_header(tx, (const uint8_t *)"Content-Type", 12, (const uint8_t *)"text/html", 9) == WAF_OK);
    CHECK(waf_process_response_headers(tx, 200, (const uint8_t *)"HTTP/1.1", 8) == WAF_OK);
    CHECK(waf_inspects_response_body(tx) == 1);
    CHECK(waf_append_response_body(tx, (const uint8_t *)"<p>SEC", 6, NULL) == WAF_OK);
    CHECK(waf_append_response_body(tx, (const uint8_t *)"RET</p>", 7, NULL) == WAF_OK);
    CHECK(waf_process_response_body(tx) == WAF_OK);
    CHECK(waf_intervention(tx, &it) == 1 && it.status == 502 && it.phase == 4);
    CHECK(waf_process_logging(tx) == WAF_OK);
    waf_transaction_free(tx);
}

/* A compressed request body is inspected decoded (an attack inside gzip is
 * seen, fed in two chunks split inside the stream; zlib-wrapped deflate
 * too); a damaged one gets 400, one in a coding that cannot be decoded 415. */
static const uint8_t GZIP_ATTACK[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x4b, 0xb4, 0x35, 0x54, 0x4b, 0xb2, 0x4d, 0x2c, 0x29, 0x49, 0x4c, 0xce, 0x06, 0x00, 0xf0, 0x1d, 0x7e, 0xf0, 0x0c, 0x00, 0x00, 0x00};
static const uint8_t ZLIB_ATTACK[] = {0x78, 0x9c, 0x4b, 0xb2, 0x4d, 0x2c, 0x29, 0x49, 0x4c, 0xce, 0x06, 0x00, 0x0d, 0x71, 0x03, 0x18};

static int compressed_body(const waf_ruleset *rs, const char *coding, const uint8_t *body, size_t len) {
    waf_intervention_t it;
    waf_transaction *tx = start(rs, "/form", "POST");
    CHECK(waf_add_request_header(tx, (const uint8_t *)"Content-Type", 12,
                                 (const uint8_t *)"application/x-www-form-urlencoded", 33) == WAF_OK);
    CHECK(waf_add_request_header(tx, (const uint8_t *)"Content-Encoding", 16, (const uint8_t *)coding,
                                 strlen(coding)) == WAF_OK);
    CHECK(waf_process_request_headers(tx) == WAF_OK);
    CHECK(waf_append_request_body(tx, body, len / 2, NULL) == WAF_OK);
    CHECK(waf_append_request_body(tx, body + len / 2, len - len / 2, NULL) == WAF_OK);
    CHECK(waf_process_request_body(tx) == WAF_OK);
    int status = waf_intervention(tx, &it) == 1 ? it.status : 0;
    CHECK(waf_process_logging(tx) == WAF_OK);
    waf_transaction_free(tx);
    return status;
}

static void compressed_bodies(const waf_ruleset *rs) {
    uint8_t damaged[sizeof GZIP_ATTACK];
    memcpy(damaged, GZIP_ATTACK, sizeof damaged);
    damaged[sizeof damaged - 12] ^= 0xff;
    CHECK(compressed_body(rs, "gzip", GZIP_ATTACK, sizeof GZIP_ATTACK) == 403);
    CHECK(compressed_body(rs, "deflate", ZLIB_ATTACK, sizeof ZLIB_ATTACK) == 403);
    CHECK(compressed_body(rs, "gzip", damaged, sizeof damaged) == 400);
    CHECK(compressed_body(rs, "gzip", GZIP_ATTACK, sizeof GZIP_ATTACK - 9) == 400); /* cut short */
    CHECK(compressed_body(rs, "br", (const uint8_t *)"a=1", 3) == 415);
    CHECK(compressed_body(rs, "identity", (const uint8_t *)"b=attack", 8) == 403);
    CHECK(compressed_body(rs, "identity", (const uint8_t *)"b=fine", 6) == 0);
}

/* Persistent collections: a per-client counter kept in the ruleset's
 * store, handed to the ruleset of a reload, with its figures and limit. */
static const char COUNTING[] =
    "SecRuleEngine On\n"
    "SecAction \"id:10,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR}\"\n"
    "SecAction \"id:12,phase:1,pass,nolog,setvar:ip.hits=+1\"\n"
    "SecRule IP:hits \"@gt %{tx.allowed}\" \"id:11,phase:1,deny,status:429,log\"\n";

static int counted_request(const waf_ruleset *rs) {
    waf_transaction *tx = start(rs, "/", "GET");
    CHECK(waf_process_request_headers(tx) == WAF_OK);
    waf_intervention_t it;
    int status = waf_intervention(tx, &it) == 1 ? it.status : 200;
    waf_transaction_free(tx);
    return status;
}

static waf_ruleset *counting_rules(int allowed) {
    char text[512];
    snprintf(text, sizeof text, "SecAction \"id:9,phase:1,pass,nolog,setvar:tx.allowed=%d\"\n%s", allowed, COUNTING);
    waf_ruleset *rs = NULL;
    CHECK(waf_ruleset_from_string("counting.conf", (const uint8_t *)text, strlen(text), &rs, NULL) == WAF_OK);
    return rs;
}

static void persistent_collections(void) {
    waf_ruleset *old = counting_rules(3);
    for (int i = 0; i < 3; i++) CHECK(counted_request(old) == 200);
    CHECK(counted_request(old) == 429);
    waf_collection_stats_t st;
    CHECK(waf_ruleset_collection_stats(old, &st) == WAF_OK);
    CHECK(st.records == 1 && st.bytes > 0 && st.evictions == 0 && st.refused_writes == 0);
    CHECK(waf_ruleset_collection_stats(old, NULL) == WAF_ERR_NULL);

    /* A reload to rules allowing 5: with the old store, the client's 4
     * requests count, so its sixth is refused; without it, it starts anew. */
    waf_ruleset *fresh = counting_rules(5);
    waf_ruleset *reloaded = counting_rules(5);
    waf_transaction *busy = waf_transaction_new(reloaded);
    CHECK(waf_ruleset_share_collections(reloaded, old) == WAF_ERR_BUSY);
    waf_transaction_free(busy);
    CHECK(waf_ruleset_share_collections(reloaded, old) == WAF_OK);
    CHECK(waf_ruleset_share_collections(NULL, old) == WAF_ERR_NULL);
    CHECK(waf_ruleset_share_collections(reloaded, NULL) == WAF_ERR_NULL);
    waf_ruleset_free(old); /* the store lives on in `reloaded` */
    CHECK(counted_request(reloaded) == 200);
    CHECK(counted_request(reloaded) == 429);
    for (int i = 0; i < 5; i++) CHECK(counted_request(fresh) == 200);
    CHECK(counted_request(fresh) == 429);

    /* A limit of 0 keeps nothing: the write is refused, the request
     * counts from zero in its own transaction. */
    CHECK(waf_ruleset_set_collection_memory(reloaded, 0) == WAF_OK);
    CHECK(waf_ruleset_set_collection_memory(NULL, 0) == WAF_ERR_NULL);
    CHECK(waf_ruleset_collection_stats(reloaded, &st) == WAF_OK);
    uint64_t refused = st.refused_writes;
    waf_transaction *tx = waf_transaction_new(reloaded);
    CHECK(waf_process_connection(tx, "198.51.100.7", 40000, "127.0.0.1", 80) == WAF_OK);
    CHECK(waf_process_uri(tx, (const uint8_t *)"/", 1, (const uint8_t *)"GET", 3, (const uint8_t *)"HTTP/1.1", 8) == WAF_OK);
    CHECK(waf_process_request_headers(tx) == WAF_OK);
    waf_transaction_free(tx);
    CHECK(waf_ruleset_collection_stats(reloaded, &st) == WAF_OK);
    CHECK(st.refused_writes > refused);
    waf_ruleset_free(reloaded);

    /* Sharing through Redis (nothing is connected by these calls): a URL
     * that is not Redis's, and a CA file with a plain redis:// URL, are
     * refused with why; a good one starts the exchanges, once per store,
     * and unsharing ends them (Redis is not there: each counts alone). */
    char *why = NULL;
    CHECK(waf_collections_check_redis("http://127.0.0.1:1", NULL, &why) == WAF_ERR_CONFIG);
    CHECK(why != NULL && strstr(why, "give redis://") != NULL);
    waf_string_free(why);
    why = NULL;
    CHECK(waf_collections_check_redis("redis://127.0.0.1:1", "ca.pem", &why) == WAF_ERR_CONFIG);
    CHECK(why != NULL && strstr(why, "a CA file is for TLS") != NULL);
    waf_string_free(why);
    CHECK(waf_collections_check_redis("redis://127.0.0.1:1", NULL, NULL) == WAF_OK);
    CHECK(waf_collections_check_redis(NULL, NULL, NULL) == WAF_ERR_NULL);
    CHECK(waf_collections_share_redis(fresh, "http://x", NULL, NULL) == WAF_ERR_CONFIG);
    CHECK(waf_collections_share_redis(NULL, "redis://127.0.0.1:1", NULL, NULL) == WAF_ERR_NULL);
    CHECK(waf_collections_share_redis(fresh, "redis://127.0.0.1:1", NULL, NULL) == WAF_OK);
    CHECK(waf_collections_share_redis(fresh, "redis://127.0.0.1:1", NULL, NULL) == WAF_OK);
    CHECK(counted_request(fresh) == 429);
    CHECK(waf_collections_unshare() == WAF_OK);
    waf_ruleset_free(fresh);
}

static void *worker(void *rs) {
    for (int i = 0; i < 50; i++) benign_and_blocked((const waf_ruleset *)rs);
    return NULL;
}

int main(void) {
    /* Broken rules: an error code and the diagnostics, with a location. */
    waf_ruleset *rs = NULL;
    char *diag = NULL;
    const char broken[] = "SecRule ARGS \"@nope x\" \"id:1\"\n";
    CHECK(waf_ruleset_from_string("broken.conf", (const uint8_t *)broken, strlen(broken), &rs, &diag) == WAF_ERR_COMPILE);
    CHECK(rs == NULL && diag != NULL && strstr(diag, "broken.conf:1:") != NULL);
    waf_string_free(diag);
    CHECK(waf_ruleset_from_file("/nonexistent/rules.conf", &rs, NULL) == WAF_ERR_COMPILE);

    /* NULL and bad arguments are errors, not crashes. */
    CHECK(waf_ruleset_from_string("x", NULL, 5, &rs, NULL) == WAF_ERR_NULL);
    CHECK(waf_ruleset_from_string("x", (const uint8_t *)"\xff\xfe", 2, &rs, NULL) == WAF_ERR_UTF8);
    CHECK(waf_ruleset_from_file(NULL, &rs, NULL) == WAF_ERR_NULL);
    CHECK(waf_transaction_new(NULL) == NULL);
    CHECK(waf_process_uri(NULL, NULL, 0, NULL, 0, NULL, 0) == WAF_ERR_NULL);
    CHECK(waf_process_request_headers(NULL) == WAF_ERR_NULL);
    waf_transaction_free(NULL);
    waf_ruleset_free(NULL);
    waf_string_free(NULL);

    CHECK(waf_ruleset_from_string("rules.conf", (const uint8_t *)RULES, strlen(RULES), &rs, &diag) == WAF_OK);
    CHECK(rs != NULL);
    {
        waf_transaction *tx = waf_transaction_new(rs);
        waf_intervention_t it;
        CHECK(waf_intervention(tx, NULL) == WAF_ERR_NULL);
        CHECK(waf_matched_rules(tx, NULL, 3) == WAF_ERR_NULL);
        CHECK(waf_process_connection(tx, NULL, 1, "127.0.0.1", 80) == WAF_ERR_NULL);
        CHECK(waf_process_uri(tx, NULL, 3, (const uint8_t *)"GET", 3, NULL, 0) == WAF_ERR_NULL);
        CHECK(waf_intervention(tx, &it) == 0);
        waf_transaction_free(tx);
    }

    compressed_bodies(rs);
    persistent_collections();

    /* One ruleset, two threads. */
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, worker, rs) == 0);
    CHECK(pthread_create(&b, NULL, worker, rs) == 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);

    /* A transaction keeps its ruleset alive after the ruleset is freed. */
    waf_transaction *late = start(rs, "/?q=attack", "GET");
    waf_ruleset_free(rs);
    CHECK(waf_process_request_headers(late) == WAF_OK);
    CHECK(waf_process_request_body(late) == WAF_OK);
    waf_intervention_t it;
    CHECK(waf_intervention(late, &it) == 1 && it.rule_id == 1);
    waf_transaction_free(late);

    printf("ok (waf %s)\n", waf_version());
    return 0;
}
