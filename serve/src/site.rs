//! Sites: which rules, exceptions and upstream a request gets, chosen by
//! host and path with filter expressions (the manifest's `sites`).

use crate::filter::{Filter, RequestView};
use crate::rules::Rules;
use crate::upstream::Upstream;
use std::sync::Arc;
use waf_engine::Transaction;

/// Rules removed for the requests an exception's filter matches.
#[derive(Clone, Debug)]
pub struct Exception {
    /// Which requests.
    pub when: Filter,
    /// Rule id ranges removed (`first..=last`).
    pub remove_ids: Vec<(u64, u64)>,
    /// Rule tags removed.
    pub remove_tags: Vec<String>,
}

/// What a custom rule does to the requests its filter matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomAction {
    /// Answer with this status at once; nothing reaches the upstream.
    Block(u16),
    /// Answer with this redirection status and a `Location` made from the
    /// template (`https://{host}{uri}`); nothing reaches the upstream.
    Redirect(u16, crate::redirect::Location),
    /// No SecLang rule runs for the request (the proxy's own limits still
    /// apply).
    Allow,
    /// Only write a line to the error log, then go on.
    Log,
    /// Count the request against a limit per key; over it, answer at once
    /// (with `Retry-After`), else go on.
    RateLimit(RateLimit),
}

/// A `rate_limit` custom rule's limit: at most `requests` per `period`
/// seconds for each value of `key`, counted in fixed windows that start at
/// a key's first request (as Cloudflare's rate limiting rules and nginx's
/// `limit_req` without a burst count requests, in windows or by rate). The
/// counts live in the process's persistent-collection store
/// (`rules::collection_store`): bounded with it, kept across reloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed in a window.
    pub requests: u64,
    /// The window, in seconds.
    pub period: u64,
    /// What the requests are counted by (`ip.src` by default).
    pub key: crate::filter::Key,
    /// The status of a request over the limit (429 by default).
    pub status: u16,
    /// Only log the requests over the limit (nginx's `limit_req_dry_run`):
    /// to see what a limit would do before it acts.
    pub dry_run: bool,
}

impl RateLimit {
    /// Counts `r` for rule `rule`: `Some(seconds until the window ends)`
    /// when it is over the limit.
    pub(crate) fn over(&self, rule: &str, r: &RequestView<'_>) -> Option<u64> {
        // "rate", a NUL, the rule, a NUL, the key's value: no collection's
        // record id starts with "rate\0" (see `count_in_window`).
        let mut id = Vec::with_capacity(rule.len() + 64);
        id.extend_from_slice(b"rate\0");
        id.extend_from_slice(rule.as_bytes());
        id.push(0);
        self.key.with_value(r, |v| id.extend_from_slice(v));
        let store = crate::rules::collection_store();
        let (n, left) = store.count_in_window(&id, self.period, waf_engine::epoch_secs())?;
        (n > self.requests).then_some(left.max(1))
    }

    /// The error log's words for a request over the limit.
    pub(crate) fn over_message(&self, retry_after: u64) -> String {
        let (what, dry) = if self.dry_run {
            ("would answer", " (dry run)")
        } else {
            ("answered", "")
        };
        format!(
            "over {} requests in {} s by {}: {what} {}, retry after {retry_after} s{dry}",
            self.requests,
            self.period,
            self.key.source(),
            self.status,
        )
    }
}

/// The custom rule that acts on a request, and for a rate limit, the
/// seconds until its window ends.
pub(crate) struct Acting<'s> {
    pub rule: &'s CustomRule,
    pub retry_after: u64,
}

/// A custom rule: the first whose filter matches acts (`log` rules do not
/// stop the search).
#[derive(Clone, Debug)]
pub struct CustomRule {
    /// A name for logs and metrics (`site/name`).
    pub name: String,
    /// Which requests.
    pub when: Filter,
    /// What happens to them.
    pub action: CustomAction,
}

/// One site.
pub struct Site {
    /// The site's name (logs, metrics).
    pub name: String,
    /// Which requests belong to the site; `None`: every request.
    pub when: Option<Filter>,
    /// Its rules (shared with other sites that name the same rules).
    pub rules: Arc<Rules>,
    pub(crate) upstream: Arc<Upstream>,
    /// Custom rules, in order, before the SecLang rules.
    pub custom: Vec<CustomRule>,
    /// Exceptions, applied before phase 1.
    pub exceptions: Vec<Exception>,
    /// Its counters on `/metrics` (kept across reloads by name).
    pub(crate) counts: Arc<crate::metrics::SiteCounts>,
    /// What a client the rules block gets, if not the proxy's own text.
    pub(crate) block_page: Option<Arc<crate::block_page::BlockPage>>,
}

impl Site {
    /// The first custom rule that acts on the request (a block, redirect
    /// or allow, or a rate limit the request is over), after calling
    /// `logged` for each rule met on the way that only logs: a `log` rule
    /// (with `None`), or a rate limit in dry run the request is over (with
    /// the seconds its window has left). A rate limit counts each request
    /// its filter matches.
    pub(crate) fn custom_action<'s>(
        &'s self,
        r: &RequestView<'_>,
        mut logged: impl FnMut(&'s CustomRule, Option<u64>),
    ) -> Option<Acting<'s>> {
        for c in &self.custom {
            if !c.when.matches(r) {
                continue;
            }
            match &c.action {
                CustomAction::Log => logged(c, None),
                CustomAction::RateLimit(limit) => match limit.over(&c.name, r) {
                    Some(retry_after) if limit.dry_run => logged(c, Some(retry_after)),
                    Some(retry_after) => {
                        return Some(Acting {
                            rule: c,
                            retry_after,
                        })
                    }
                    None => {}
                },
                _ => {
                    return Some(Acting {
                        rule: c,
                        retry_after: 0,
                    })
                }
            }
        }
        None
    }

    /// Applies the exceptions whose filters match to `tx`.
    pub(crate) fn apply_exceptions<'s>(&'s self, r: &RequestView<'_>, tx: &mut Transaction<'s>) {
        for e in self.exceptions.iter().filter(|e| e.when.matches(r)) {
            for &(a, b) in &e.remove_ids {
                tx.remove_rules_by_id(a, b);
            }
            for t in &e.remove_tags {
                tx.remove_rules_by_tag(t);
            }
        }
    }
}

/// The sites, tried in order: a request goes to the first whose filter
/// matches.
pub struct Sites {
    pub(crate) list: Vec<Site>,
}

impl Sites {
    /// The ruleset each site runs now (one per site, repeated for sites
    /// that share their rules).
    pub(crate) fn rulesets(&self) -> impl Iterator<Item = Arc<waf_engine::Ruleset>> + '_ {
        self.list.iter().map(|site| site.rules.current())
    }

    /// One site for every request: `rules` in front of `upstream` (what
    /// `waf serve -c ... --upstream ...` runs).
    pub fn single(rules: Arc<Rules>, upstream: &hyper::Uri) -> Result<Sites, String> {
        Ok(Sites {
            list: vec![Site {
                name: "default".into(),
                when: None,
                rules,
                upstream: Arc::new(Upstream::new("default", upstream)?),
                custom: Vec::new(),
                exceptions: Vec::new(),
                counts: crate::metrics::SiteCounts::new("default"),
                block_page: None,
            }],
        })
    }

    /// Takes the counters of the sites of `old` that have the same names (a
    /// reload), and returns every site's.
    pub(crate) fn adopt_counts(
        &mut self,
        old: &[Arc<crate::metrics::SiteCounts>],
    ) -> Vec<Arc<crate::metrics::SiteCounts>> {
        for site in &mut self.list {
            site.counts = site.counts.adopt(old);
        }
        self.list.iter().map(|s| s.counts.clone()).collect()
    }

    /// The upstreams the sites send to, each once.
    pub(crate) fn upstreams(&self) -> Vec<Arc<Upstream>> {
        let mut all: Vec<Arc<Upstream>> = Vec::new();
        for s in &self.list {
            if !all.iter().any(|u| Arc::ptr_eq(u, &s.upstream)) {
                all.push(s.upstream.clone());
            }
        }
        all
    }

    /// Takes what the running sites' upstreams know of their servers (a
    /// reload; see `Upstream::adopt_state`).
    pub(crate) fn adopt_upstream_state(&self, old: &Sites) {
        let old = old.upstreams();
        for u in self.upstreams() {
            if let Some(o) = old.iter().find(|o| o.name == u.name) {
                u.adopt_state(o);
            }
        }
    }

    /// The site a request belongs to.
    pub(crate) fn select(&self, r: &RequestView<'_>) -> Option<&Site> {
        self.list
            .iter()
            .find(|s| s.when.as_ref().is_none_or(|f| f.matches(r)))
    }

    /// The sites' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|s| s.name.as_str())
    }
}
