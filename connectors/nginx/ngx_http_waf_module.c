/*
 * ngx_http_waf_module: the waf engine in nginx, through its C ABI
 * (ffi/include/waf.h). Directives mirror ModSecurity-nginx's, so that a
 * migration is a rename:
 *
 *   waf on|off;                 (modsecurity on|off)
 *   waf_rules_file PATH;        (modsecurity_rules_file; repeatable)
 *   waf_rules 'SecLang text';   (modsecurity_rules; repeatable)
 *   waf_transaction_id $request_id;   (modsecurity_transaction_id)
 *   waf_collection_redis URL [CA_FILE];   (http level; no ModSecurity-nginx
 *                               equivalent: see below)
 *
 * Phases: request headers and body in the access phase (the body is read
 * and inspected before the request is passed on: nothing reaches the
 * upstream before phase 2 allows it); response headers in the header
 * filter; when the engine inspects the response body, the headers are held
 * and the body buffered until phase 4 has decided, so a phase-4 block
 * replaces the response before any byte of it is sent (ModSecurity-nginx
 * sends the headers first: owasp-modsecurity/ModSecurity-nginx#254);
 * logging in the log phase, with ModSecurity-style lines in nginx's error
 * log (level info, as ModSecurity-nginx).
 *
 * Persistent collections (initcol: per-client counters, blocks) live in
 * one store for all the rulesets of a configuration (as ModSecurity keeps
 * its collections in one instance), one per worker process. With
 * waf_collection_redis, each worker shares that store through Redis
 * (redis:// or rediss:// URL, CA_FILE for a private CA) with the other
 * workers, nginx servers and `waf serve` instances given the same Redis:
 * a thread of the worker sends its writes and brings back the shared state
 * every 100 ms, and a reload's new workers fetch what their clients need.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "waf.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

typedef struct {
    ngx_flag_t                 enable;
    ngx_array_t               *sources;   /* of ngx_str_t: SecLang lines (Include or text) */
    waf_ruleset               *rules;
    ngx_http_complex_value_t  *transaction_id;
} ngx_http_waf_loc_conf_t;

typedef struct {
    ngx_str_t                  redis_url;   /* waf_collection_redis, NUL-terminated */
    ngx_str_t                  redis_ca;
    waf_ruleset               *store_owner; /* the first ruleset compiled: its store is everyone's */
} ngx_http_waf_main_conf_t;

typedef struct {
    waf_transaction *tx;
    ngx_uint_t       body_requested:1;
    ngx_uint_t       waiting_body:1;
    ngx_uint_t       body_done:1;
    ngx_uint_t       intervened:1;
    ngx_uint_t       hold_response:1;   /* phase 4 inspects the body */
    ngx_uint_t       response_done:1;
    ngx_uint_t       logged:1;
    ngx_chain_t     *held;              /* the buffered response body */
    ngx_chain_t    **held_last;
} ngx_http_waf_ctx_t;

static ngx_int_t ngx_http_waf_init(ngx_conf_t *cf);
static void *ngx_http_waf_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_waf_collection_redis(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_int_t ngx_http_waf_init_process(ngx_cycle_t *cycle);
static void ngx_http_waf_exit_process(ngx_cycle_t *cycle);
static void *ngx_http_waf_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_waf_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_waf_rules_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_waf_rules(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;

static ngx_command_t ngx_http_waf_commands[] = {
    { ngx_string("waf"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_waf_loc_conf_t, enable), NULL },
    { ngx_string("waf_rules_file"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_waf_rules_file, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("waf_rules"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_waf_rules, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL },
    { ngx_string("waf_transaction_id"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot, NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_waf_loc_conf_t, transaction_id), NULL },
    { ngx_string("waf_collection_redis"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE12,
      ngx_http_waf_collection_redis, NGX_HTTP_MAIN_CONF_OFFSET, 0, NULL },
    ngx_null_command
};

static ngx_http_module_t ngx_http_waf_module_ctx = {
    NULL, ngx_http_waf_init,
    ngx_http_waf_create_main_conf, NULL,
    NULL, NULL,
    ngx_http_waf_create_loc_conf, ngx_http_waf_merge_loc_conf
};

ngx_module_t ngx_http_waf_module = {
    NGX_MODULE_V1,
    &ngx_http_waf_module_ctx, ngx_http_waf_commands, NGX_HTTP_MODULE,
    NULL, NULL, ngx_http_waf_init_process, NULL, NULL, ngx_http_waf_exit_process, NULL,
    NGX_MODULE_V1_PADDING
};

/* ------------------------------------------------------------ config */

static void ngx_http_waf_free_rules(void *data) {
    waf_ruleset_free((waf_ruleset *) data);
#if defined(__GLIBC__)
    /* On a reload the master frees the old rules here, as it destroys the
     * old cycle's pool right after building the new one and before forking
     * the new workers. glibc would keep the freed pages (and those of the
     * new rules' compilation) resident, in the master and in every worker
     * it forks: give them back first. */
    if (ngx_process == NGX_PROCESS_MASTER || ngx_process == NGX_PROCESS_SINGLE) {
        malloc_trim(0);
    }
#endif
}

static void *ngx_http_waf_create_main_conf(ngx_conf_t *cf) {
    return ngx_pcalloc(cf->pool, sizeof(ngx_http_waf_main_conf_t));
}

/* A copy of `s` with a terminating NUL, from the configuration's pool. */
static ngx_int_t ngx_http_waf_c_string(ngx_conf_t *cf, ngx_str_t *s, ngx_str_t *out) {
    out->data = ngx_pnalloc(cf->pool, s->len + 1);
    if (out->data == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(out->data, s->data, s->len);
    out->data[s->len] = '\0';
    out->len = s->len;
    return NGX_OK;
}

/* waf_collection_redis URL [CA_FILE]: checked here (nginx -t says what is
 * wrong); each worker starts sharing in init_process. */
static char *ngx_http_waf_collection_redis(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_http_waf_main_conf_t *m = conf;
    ngx_str_t *value = cf->args->elts, ca;
    char *error = NULL;

    if (m->redis_url.len) {
        return "is duplicate";
    }
    if (ngx_http_waf_c_string(cf, &value[1], &m->redis_url) != NGX_OK) {
        return NGX_CONF_ERROR;
    }
    if (cf->args->nelts == 3) {
        ca = value[2];
        if (ngx_conf_full_name(cf->cycle, &ca, 1) != NGX_OK
            || ngx_http_waf_c_string(cf, &ca, &m->redis_ca) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }
    if (waf_collections_check_redis((char *) m->redis_url.data,
                                    m->redis_ca.len ? (char *) m->redis_ca.data : NULL,
                                    &error) != WAF_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "waf_collection_redis: %s", error ? error : "wrong");
        waf_string_free(error);
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

static ngx_int_t ngx_http_waf_init_process(ngx_cycle_t *cycle) {
    ngx_http_waf_main_conf_t *m;
    char *error = NULL;

    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE) {
        return NGX_OK;
    }
    m = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_waf_module);
    if (m == NULL || m->redis_url.len == 0 || m->store_owner == NULL) {
        return NGX_OK;
    }
    if (waf_collections_share_redis(m->store_owner, (char *) m->redis_url.data,
                                    m->redis_ca.len ? (char *) m->redis_ca.data : NULL,
                                    &error) != WAF_OK) {
        /* Checked when the configuration was read: counts stay per worker. */
        ngx_log_error(NGX_LOG_ERR, cycle->log, 0, "waf_collection_redis: %s", error ? error : "failed");
        waf_string_free(error);
    }
    return NGX_OK;
}

static void ngx_http_waf_exit_process(ngx_cycle_t *cycle) {
    /* A last exchange: the writes since the one before reach Redis. */
    waf_collections_unshare();
}

static void *ngx_http_waf_create_loc_conf(ngx_conf_t *cf) {
    ngx_http_waf_loc_conf_t *c = ngx_pcalloc(cf->pool, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->enable = NGX_CONF_UNSET;
    return c;
}

static char *ngx_http_waf_add_source(ngx_conf_t *cf, ngx_http_waf_loc_conf_t *c, ngx_str_t text) {
    ngx_str_t *s;
    if (c->sources == NULL) {
        c->sources = ngx_array_create(cf->pool, 4, sizeof(ngx_str_t));
        if (c->sources == NULL) {
            return NGX_CONF_ERROR;
        }
    }
    s = ngx_array_push(c->sources);
    if (s == NULL) {
        return NGX_CONF_ERROR;
    }
    *s = text;
    return NGX_CONF_OK;
}

static char *ngx_http_waf_rules_file(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_str_t *value = cf->args->elts, path = value[1], line;
    if (ngx_conf_full_name(cf->cycle, &path, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }
    line.len = sizeof("Include \"\"\n") - 1 + path.len;
    line.data = ngx_pnalloc(cf->pool, line.len);
    if (line.data == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_sprintf(line.data, "Include \"%V\"\n", &path);
    return ngx_http_waf_add_source(cf, conf, line);
}

static char *ngx_http_waf_rules(ngx_conf_t *cf, ngx_command_t *cmd, void *conf) {
    ngx_str_t *value = cf->args->elts, text;
    text.len = value[1].len + 1;
    text.data = ngx_pnalloc(cf->pool, text.len);
    if (text.data == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memcpy(text.data, value[1].data, value[1].len);
    text.data[value[1].len] = '\n';
    return ngx_http_waf_add_source(cf, conf, text);
}

/* A location with its own rule directives compiles them (after its
 * parent's, as ModSecurity-nginx merges); otherwise it shares its parent's
 * ruleset. Errors stop nginx with the compiler's diagnostics. */
static char *ngx_http_waf_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child) {
    ngx_http_waf_loc_conf_t *p = parent, *c = child;
    ngx_http_waf_main_conf_t *m;
    ngx_pool_cleanup_t *cln;
    ngx_str_t *src;
    ngx_uint_t i;
    size_t len = 0;
    u_char *text, *at;
    char *diag = NULL;
    char name[NGX_MAX_PATH + 1];

    ngx_conf_merge_value(c->enable, p->enable, 0);
    if (c->transaction_id == NULL) {
        c->transaction_id = p->transaction_id;
    }
    if (c->sources == NULL) {
        c->sources = p->sources;
        c->rules = p->rules;
        return NGX_CONF_OK;
    }
    if (p->sources != NULL && p->sources != c->sources) {
        /* The parent's sources first. */
        ngx_array_t *all = ngx_array_create(cf->pool, p->sources->nelts + c->sources->nelts, sizeof(ngx_str_t));
        if (all == NULL) {
            return NGX_CONF_ERROR;
        }
        src = p->sources->elts;
        for (i = 0; i < p->sources->nelts; i++) {
            *(ngx_str_t *) ngx_array_push(all) = src[i];
        }
        src = c->sources->elts;
        for (i = 0; i < c->sources->nelts; i++) {
            *(ngx_str_t *) ngx_array_push(all) = src[i];
        }
        c->sources = all;
    }
    src = c->sources->elts;
    for (i = 0; i < c->sources->nelts; i++) {
        len += src[i].len;
    }
    text = ngx_pnalloc(cf->pool, len + 1);
    if (text == NULL) {
        return NGX_CONF_ERROR;
    }
    at = text;
    for (i = 0; i < c->sources->nelts; i++) {
        at = ngx_cpymem(at, src[i].data, src[i].len);
    }
    ngx_snprintf((u_char *) name, NGX_MAX_PATH, "%V%Z", &cf->conf_file->file.name);
    if (waf_ruleset_from_string(name, text, len, &c->rules, &diag) != WAF_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "waf: the rules do not compile:\n%s", diag ? diag : "(no diagnostics)");
        waf_string_free(diag);
        return NGX_CONF_ERROR;
    }
    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        waf_ruleset_free(c->rules);
        return NGX_CONF_ERROR;
    }
    cln->handler = ngx_http_waf_free_rules;
    cln->data = c->rules;
    /* One store of persistent collections for the whole configuration. */
    m = ngx_http_conf_get_module_main_conf(cf, ngx_http_waf_module);
    if (m->store_owner == NULL) {
        m->store_owner = c->rules;
    } else if (waf_ruleset_share_collections(c->rules, m->store_owner) != WAF_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "waf: cannot share the persistent collections");
        return NGX_CONF_ERROR;
    }
    return NGX_CONF_OK;
}

/* ------------------------------------------------------------ helpers */

static void ngx_http_waf_free_tx(void *data) {
    ngx_http_waf_ctx_t *ctx = data;
    waf_transaction_free(ctx->tx);
    ctx->tx = NULL;
}

static void ngx_http_waf_log_line(void *data, const char *line) {
    ngx_log_error(NGX_LOG_INFO, (ngx_log_t *) data, 0, "%s", line);
}

static ngx_uint_t ngx_http_waf_port(struct sockaddr *sa) {
    return ngx_inet_get_port(sa);
}

/* The status to answer with when the engine intervened, or NGX_DECLINED. */
static ngx_int_t ngx_http_waf_intervention(ngx_http_request_t *r, ngx_http_waf_ctx_t *ctx) {
    waf_intervention_t it;
    if (waf_intervention(ctx->tx, &it) != 1) {
        return NGX_DECLINED;
    }
    ctx->intervened = 1;
    if (strcmp(it.action, "drop") == 0) {
        return NGX_HTTP_CLOSE;
    }
    if (it.url != NULL && it.status >= 300 && it.status < 400) {
        ngx_table_elt_t *location;
        ngx_http_clear_location(r);
        location = ngx_list_push(&r->headers_out.headers);
        if (location == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        location->hash = 1;
        ngx_str_set(&location->key, "Location");
        location->value.len = ngx_strlen(it.url);
        location->value.data = ngx_pnalloc(r->pool, location->value.len);
        if (location->value.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_memcpy(location->value.data, it.url, location->value.len);
        r->headers_out.location = location;
    }
    return it.status;
}

static ngx_int_t ngx_http_waf_feed_file(ngx_http_waf_ctx_t *ctx, ngx_buf_t *b, ngx_log_t *log) {
    u_char chunk[8192];
    off_t at = b->file_pos;
    while (at < b->file_last) {
        size_t want = (size_t) ngx_min((off_t) sizeof(chunk), b->file_last - at);
        ssize_t n = ngx_read_file(b->file, chunk, want, at);
        if (n <= 0) {
            return NGX_ERROR;
        }
        waf_append_request_body(ctx->tx, chunk, (size_t) n, NULL);
        at += n;
    }
    return NGX_OK;
}

/* ------------------------------------------------------------ phases 1-2 */

static void ngx_http_waf_body_read(ngx_http_request_t *r) {
    ngx_http_waf_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_waf_module);
    r->main->count--;
    if (ctx == NULL) {
        return;
    }
    ctx->body_done = 1;
    if (ctx->waiting_body) {
        ctx->waiting_body = 0;
        r->write_event_handler = ngx_http_core_run_phases;
        ngx_http_core_run_phases(r);
    }
}

static ngx_int_t ngx_http_waf_access(ngx_http_request_t *r) {
    ngx_http_waf_loc_conf_t *lc = ngx_http_get_module_loc_conf(r, ngx_http_waf_module);
    ngx_http_waf_ctx_t *ctx;
    ngx_pool_cleanup_t *cln;
    ngx_list_part_t *part;
    ngx_table_elt_t *h;
    ngx_uint_t i;
    ngx_int_t rc;
    u_char client[NGX_SOCKADDR_STRLEN + 1], server[NGX_SOCKADDR_STRLEN + 1];
    ngx_str_t server_addr;

    if (!lc->enable || lc->rules == NULL || r != r->main) {
        return NGX_DECLINED;
    }
    ctx = ngx_http_get_module_ctx(r, ngx_http_waf_module);
    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(*ctx));
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ctx->tx = waf_transaction_new(lc->rules);
        if (ctx->tx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        cln = ngx_pool_cleanup_add(r->pool, 0);
        if (cln == NULL) {
            waf_transaction_free(ctx->tx);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        cln->handler = ngx_http_waf_free_tx;
        cln->data = ctx;
        ctx->held_last = &ctx->held;
        ngx_http_set_ctx(r, ctx, ngx_http_waf_module);
        waf_transaction_set_log(ctx->tx, ngx_http_waf_log_line, r->connection->log);
        if (lc->transaction_id != NULL) {
            ngx_str_t id;
            if (ngx_http_complex_value(r, lc->transaction_id, &id) != NGX_OK) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            waf_transaction_set_id(ctx->tx, id.data, id.len);
        }

        ngx_snprintf(client, sizeof(client), "%V%Z", &r->connection->addr_text);
        server_addr.data = server;
        server_addr.len = NGX_SOCKADDR_STRLEN;
        if (ngx_connection_local_sockaddr(r->connection, &server_addr, 0) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        server[server_addr.len] = '\0';
        waf_process_connection(ctx->tx, (const char *) client, ngx_http_waf_port(r->connection->sockaddr),
                               (const char *) server, ngx_http_waf_port(r->connection->local_sockaddr));
        waf_process_uri(ctx->tx, r->unparsed_uri.data, r->unparsed_uri.len, r->method_name.data,
                        r->method_name.len, r->http_protocol.data, r->http_protocol.len);
        for (part = &r->headers_in.headers.part; part; part = part->next) {
            h = part->elts;
            for (i = 0; i < part->nelts; i++) {
                waf_add_request_header(ctx->tx, h[i].key.data, h[i].key.len, h[i].value.data, h[i].value.len);
            }
        }
        waf_process_request_headers(ctx->tx);
        rc = ngx_http_waf_intervention(r, ctx);
        if (rc != NGX_DECLINED) {
            return rc;
        }
    }
    if (ctx->intervened) {
        return NGX_DECLINED;
    }
    if (!ctx->body_requested) {
        ctx->body_requested = 1;
        r->request_body_in_single_buf = 1;
        r->request_body_in_persistent_file = 1;
        r->request_body_in_clean_file = 1;
        rc = ngx_http_read_client_request_body(r, ngx_http_waf_body_read);
        if (rc == NGX_ERROR || rc >= NGX_HTTP_SPECIAL_RESPONSE) {
            return rc;
        }
        if (!ctx->body_done) {
            ctx->waiting_body = 1;
            return NGX_DONE;
        }
    }
    if (!ctx->body_done) {
        return NGX_DONE;
    }
    if (r->request_body != NULL) {
        ngx_chain_t *cl;
        for (cl = r->request_body->bufs; cl; cl = cl->next) {
            ngx_buf_t *b = cl->buf;
            if (b->in_file) {
                if (ngx_http_waf_feed_file(ctx, b, r->connection->log) != NGX_OK) {
                    return NGX_HTTP_INTERNAL_SERVER_ERROR;
                }
            } else if (b->last > b->pos) {
                waf_append_request_body(ctx->tx, b->pos, (size_t) (b->last - b->pos), NULL);
            }
        }
    }
    waf_process_request_body(ctx->tx);
    rc = ngx_http_waf_intervention(r, ctx);
    if (rc != NGX_DECLINED) {
        return rc;
    }
    return NGX_DECLINED;
}

/* ------------------------------------------------------------ phases 3-4 */

static ngx_int_t ngx_http_waf_header_filter(ngx_http_request_t *r) {
    ngx_http_waf_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_waf_module);
    ngx_list_part_t *part;
    ngx_table_elt_t *h;
    ngx_uint_t i;
    ngx_int_t rc;

    if (ctx == NULL || ctx->tx == NULL || ctx->intervened || r != r->main) {
        return ngx_http_next_header_filter(r);
    }
    if (r->headers_out.content_type.len) {
        waf_add_response_header(ctx->tx, (const uint8_t *) "Content-Type", 12, r->headers_out.content_type.data,
                                r->headers_out.content_type.len);
    }
    for (part = &r->headers_out.headers.part; part; part = part->next) {
        h = part->elts;
        for (i = 0; i < part->nelts; i++) {
            if (h[i].hash != 0) {
                waf_add_response_header(ctx->tx, h[i].key.data, h[i].key.len, h[i].value.data, h[i].value.len);
            }
        }
    }
    waf_process_response_headers(ctx->tx, (uint16_t) r->headers_out.status, (const uint8_t *) "HTTP/1.1", 8);
    rc = ngx_http_waf_intervention(r, ctx);
    if (rc != NGX_DECLINED) {
        return ngx_http_filter_finalize_request(r, &ngx_http_waf_module, rc);
    }
    if (waf_inspects_response_body(ctx->tx) == 1 && !r->header_only) {
        /* Held until phase 4 has seen the body. */
        ctx->hold_response = 1;
        r->filter_need_in_memory = 1;
        return NGX_OK;
    }
    return ngx_http_next_header_filter(r);
}

static ngx_int_t ngx_http_waf_body_filter(ngx_http_request_t *r, ngx_chain_t *in) {
    ngx_http_waf_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_waf_module);
    ngx_chain_t *cl;
    ngx_int_t rc;
    int last = 0;

    if (ctx == NULL || !ctx->hold_response || ctx->response_done || r != r->main) {
        return ngx_http_next_body_filter(r, in);
    }
    for (cl = in; cl; cl = cl->next) {
        ngx_buf_t *b = cl->buf;
        ngx_chain_t *copy;
        if (ngx_buf_in_memory(b) && b->last > b->pos) {
            waf_append_response_body(ctx->tx, b->pos, (size_t) (b->last - b->pos), NULL);
        }
        copy = ngx_alloc_chain_link(r->pool);
        if (copy == NULL) {
            return NGX_ERROR;
        }
        copy->buf = b;
        copy->next = NULL;
        *ctx->held_last = copy;
        ctx->held_last = &copy->next;
        if (b->last_buf) {
            last = 1;
        }
    }
    if (!last) {
        return NGX_OK;
    }
    ctx->response_done = 1;
    waf_process_response_body(ctx->tx);
    rc = ngx_http_waf_intervention(r, ctx);
    if (rc != NGX_DECLINED) {
        /* Nothing was sent: the held body is dropped and an error page goes out. */
        for (cl = ctx->held; cl; cl = cl->next) {
            cl->buf->pos = cl->buf->last;
            cl->buf->file_pos = cl->buf->file_last;
        }
        ctx->held = NULL;
        r->headers_out.content_length_n = -1;
        return ngx_http_filter_finalize_request(r, &ngx_http_waf_module, rc);
    }
    rc = ngx_http_next_header_filter(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }
    return ngx_http_next_body_filter(r, ctx->held);
}

/* ------------------------------------------------------------ phase 5 */

static ngx_int_t ngx_http_waf_log(ngx_http_request_t *r) {
    ngx_http_waf_ctx_t *ctx = ngx_http_get_module_ctx(r, ngx_http_waf_module);
    if (ctx == NULL || ctx->tx == NULL || ctx->logged) {
        return NGX_OK;
    }
    ctx->logged = 1;
    waf_process_logging(ctx->tx);
    return NGX_OK;
}

static ngx_int_t ngx_http_waf_init(ngx_conf_t *cf) {
    ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_handler_pt *h;

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_ACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_waf_access;
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_waf_log;

    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_waf_header_filter;
    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_waf_body_filter;
    return NGX_OK;
}
