//! The HTML report of `waf profile --html FILE`: one self-contained page
//! (inline CSS, inline SVG charts, a few lines of inline JS to sort tables; no
//! external resource of any kind).
//!
//! Rule files and requests are untrusted: every string that comes from them
//! (locations, target names, chain names, file names) goes through [`esc`].

use super::{
    chain_text, fmt_bytes, fmt_ns, fmt_pct, thousands, ChainRow, EntryTarget, Report, RuleRow,
};
use std::fmt::Write;

/// Escapes text for HTML element content and quoted attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// At most `max` characters, the middle replaced by `…` (file paths keep
/// their start and their `file:line` end).
fn shorten(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let head = max / 3;
    let tail = max - head - 1;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// `file:line` of a location, without its directories.
fn short_location(loc: &str) -> &str {
    loc.rsplit(['/', '\\']).next().unwrap_or(loc)
}

const CSS: &str = r#"
:root{--bg:#f4f5f9;--card:#fff;--ink:#1c2033;--muted:#6b7189;--line:#e4e6ef;
--accent:#4f46e5;--accent2:#7c3aed;--teal:#0f9f8f;--good:#12a36d;--mid:#e0a100;--bad:#e5484d}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header{background:linear-gradient(120deg,#1e1b4b,#312e81 55%,#4338ca);color:#fff;padding:28px 0 64px}
.wrap{max-width:1180px;margin:0 auto;padding:0 28px}
header h1{margin:0;font-size:26px;font-weight:650;letter-spacing:.2px}
header h1 span{opacity:.65;font-weight:400}
header .sub{margin-top:8px;color:#c7c9f5;font-size:13px}
header .sub b{color:#fff;font-weight:550}
header .opts span{display:inline-block;margin:8px 6px 0 0;padding:2px 9px;border-radius:99px;
background:rgba(255,255,255,.13);font-size:12px}
header .opts span.off{background:rgba(229,72,77,.35)}
.cards{display:grid;grid-template-columns:repeat(4,1fr);gap:14px;margin-top:-44px}
@media(max-width:900px){.cards{grid-template-columns:repeat(2,1fr)}}
.card{background:var(--card);border-radius:12px;padding:14px 16px;box-shadow:0 1px 2px rgba(20,20,50,.06),0 4px 14px rgba(20,20,50,.06);
display:flex;align-items:center;gap:12px;min-height:86px}
.card .k{font-size:11.5px;text-transform:uppercase;letter-spacing:.6px;color:var(--muted);font-weight:600}
.card .v{font-size:25px;font-weight:680;margin-top:2px;font-variant-numeric:tabular-nums;white-space:nowrap}
.card .s{font-size:12px;color:var(--muted);margin-top:1px}
.card svg{flex:none}
section{background:var(--card);border-radius:12px;margin:18px 0;padding:18px 22px 20px;
box-shadow:0 1px 2px rgba(20,20,50,.06),0 4px 14px rgba(20,20,50,.05)}
section h2{margin:0 0 2px;font-size:17px;font-weight:650}
section p.lead{margin:0 0 12px;color:var(--muted);font-size:13px}
.grid2{display:grid;grid-template-columns:1fr;gap:0}
svg.chart{width:100%;height:auto;display:block}
svg text{font-family:inherit}
.mono,svg .mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
table{border-collapse:collapse;width:100%;font-size:13px}
.tw{overflow-x:auto}
th,td{padding:6px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:11.5px;text-transform:uppercase;letter-spacing:.5px;color:var(--muted);font-weight:650;
background:#fafbfd;position:sticky;top:0;cursor:pointer;user-select:none;white-space:nowrap}
th.n,td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
th:hover{color:var(--accent)}
th.sorted-desc::after{content:" ▾"}th.sorted-asc::after{content:" ▴"}
tbody tr:hover{background:#f7f7fd}
td.loc{color:var(--muted);font-size:12px;white-space:nowrap}
td.msg{font-size:12px;max-width:190px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
td.chain{font-size:12.5px;min-width:230px}
td.chain span{white-space:nowrap}
td.chain b{color:#a3a7c2;font-weight:400;padding:0 3px}
th .u{text-transform:none}
.chip{display:inline-block;padding:1px 7px;margin:1px 3px 2px 0;border-radius:6px;background:#eef0fb;
color:#3730a3;font-size:11.5px;white-space:nowrap}
.chip.via{background:#f2f3f6;color:#5b6075}
.chip i{font-style:normal;color:#8b8fb0;margin-left:4px}
.ids .chip{background:#f2f3f6;color:#434860}
.bar{display:inline-block;vertical-align:middle;width:54px;height:7px;border-radius:4px;background:#eceef5;margin-right:8px;overflow:hidden}
.bar i{display:block;height:100%;border-radius:4px}
.legend{display:flex;gap:16px;font-size:12px;color:var(--muted);margin:-4px 0 8px}
.legend i{display:inline-block;width:10px;height:10px;border-radius:3px;margin-right:5px;vertical-align:-1px}
details summary{cursor:pointer;color:var(--accent);font-size:13px;margin-top:8px}
dl.defs{display:grid;grid-template-columns:200px 1fr;gap:6px 18px;margin:0;font-size:13px}
dl.defs dt{font-weight:600}dl.defs dd{margin:0;color:#3c4158}
footer{color:var(--muted);font-size:12px;text-align:center;padding:8px 0 30px}
.empty{color:var(--muted);font-style:italic}
"#;

const JS: &str = r#"
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var b=t.tBodies[0],rows=Array.from(b.rows),num=th.classList.contains('n');
      var asc=th.classList.contains('sorted-desc');
      t.querySelectorAll('th').forEach(function(h){h.classList.remove('sorted-asc','sorted-desc')});
      th.classList.add(asc?'sorted-asc':'sorted-desc');
      rows.sort(function(x,y){
        var a=x.cells[i].dataset.v||x.cells[i].textContent,c=y.cells[i].dataset.v||y.cells[i].textContent;
        var r=num?(parseFloat(a)-parseFloat(c)):a.localeCompare(c);
        return asc?r:-r;});
      rows.forEach(function(r){b.appendChild(r)});
    });
  });
});
"#;

/// Colour of a hit ratio (or any "higher is better" ratio).
fn ratio_color(r: f64) -> &'static str {
    if r >= 0.8 {
        "#12a36d"
    } else if r >= 0.5 {
        "#e0a100"
    } else {
        "#e5484d"
    }
}

/// A small donut gauge for a ratio card.
fn donut(r: f64, color: &str) -> String {
    let r = r.clamp(0.0, 1.0);
    let circ = 2.0 * std::f64::consts::PI * 20.0;
    format!(
        r##"<svg width="52" height="52" viewBox="0 0 52 52" aria-hidden="true"><circle cx="26" cy="26" r="20" fill="none" stroke="#eceef5" stroke-width="7"/><circle cx="26" cy="26" r="20" fill="none" stroke="{color}" stroke-width="7" stroke-linecap="round" stroke-dasharray="{:.2} {:.2}" transform="rotate(-90 26 26)"/></svg>"##,
        circ * r,
        circ
    )
}

/// A small icon badge for a count card.
fn badge(glyph: &str, color: &str) -> String {
    format!(
        r#"<svg width="44" height="44" viewBox="0 0 44 44" aria-hidden="true"><rect width="44" height="44" rx="11" fill="{color}" opacity=".12"/><text x="22" y="29" text-anchor="middle" font-size="19" font-weight="700" fill="{color}">{glyph}</text></svg>"#
    )
}

fn card(out: &mut String, key: &str, value: &str, sub: &str, icon: &str) {
    let _ = write!(
        out,
        r#"<div class="card">{icon}<div><div class="k">{}</div><div class="v">{}</div><div class="s">{}</div></div></div>"#,
        esc(key),
        esc(value),
        esc(sub)
    );
}

/// One bar of a horizontal bar chart.
struct Bar {
    label: String,
    /// Second, lighter text: beside the label (label-above layout) or under
    /// it (label-left layout).
    sub: String,
    /// Filled fraction of the axis, 0..=1.
    frac: f64,
    value: String,
    title: String,
    color: String,
}

/// A "nice" axis maximum and step for values up to `max`.
fn nice_axis(max: f64) -> (f64, f64) {
    if max <= 0.0 {
        return (1.0, 0.25);
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| s * 5.0 >= max)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// A horizontal bar chart. `ticks`: (fraction of the axis, label).
/// `label_left`: labels in a left column (short labels); otherwise each label
/// sits above its bar (long labels such as chains).
fn bar_chart(bars: &[Bar], ticks: &[(f64, String)], label_left: bool, gradient: &str) -> String {
    const W: f64 = 1120.0;
    let left = if label_left { 330.0 } else { 8.0 };
    let right = 200.0;
    let axis = 26.0;
    let row = if label_left { 34.0 } else { 42.0 };
    let plot = W - left - right;
    let h = axis + row * bars.len() as f64 + 8.0;
    let mut s = String::new();
    let _ = write!(s, r#"<svg class="chart" viewBox="0 0 {W} {h}" role="img">"#);
    let gid = format!("g{}", gradient.trim_start_matches('#'));
    let _ = write!(
        s,
        r#"<defs><linearGradient id="{gid}" x1="0" x2="1"><stop offset="0" stop-color="{gradient}" stop-opacity=".78"/><stop offset="1" stop-color="{gradient}"/></linearGradient></defs>"#
    );
    for (f, label) in ticks {
        let x = left + plot * f;
        let _ = write!(
            s,
            r##"<line x1="{x:.1}" y1="{axis}" x2="{x:.1}" y2="{:.1}" stroke="#e7e9f2" stroke-width="1"/><text x="{x:.1}" y="15" font-size="11.5" fill="#6b7189" text-anchor="middle">{}</text>"##,
            h - 6.0,
            esc(label)
        );
    }
    for (i, b) in bars.iter().enumerate() {
        let y = axis + row * i as f64;
        let w = (plot * b.frac.clamp(0.0, 1.0)).max(if b.frac > 0.0 { 2.0 } else { 0.0 });
        let fill = if b.color.is_empty() {
            format!("url(#{gid})")
        } else {
            b.color.clone()
        };
        let _ = write!(s, "<g><title>{}</title>", esc(&b.title));
        let bar_y;
        if label_left {
            bar_y = y + 8.0;
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" font-size="13" font-weight="650" fill="#1c2033" text-anchor="end">{}</text><text x="{:.1}" y="{:.1}" font-size="11" fill="#6b7189" text-anchor="end" class="mono">{}</text>"##,
                left - 12.0,
                y + 15.0,
                esc(&b.label),
                left - 12.0,
                y + 28.0,
                esc(&b.sub)
            );
            bar(&mut s, (left, bar_y, plot, w, 18.0), &fill, &b.value);
        } else {
            bar_y = y + 19.0;
            let _ = write!(
                s,
                r##"<text x="{left}" y="{:.1}" font-size="12.5" fill="#1c2033" class="mono">{}<tspan fill="#7a7f99" font-size="11.5" font-family="system-ui,sans-serif" dx="10">{}</tspan></text>"##,
                y + 13.0,
                esc(&b.label),
                esc(&b.sub)
            );
            bar(&mut s, (left, bar_y, plot, w, 14.0), &fill, &b.value);
        }
        s.push_str("</g>");
    }
    s.push_str("</svg>");
    s
}

/// One bar of a chart: the track, the filled part and its value to the right.
/// `geom` is (left, top, track width, filled width, height).
fn bar(s: &mut String, geom: (f64, f64, f64, f64, f64), fill: &str, value: &str) {
    let (left, y, plot, w, h) = geom;
    let _ = write!(
        s,
        r##"<rect x="{left}" y="{y:.1}" width="{plot:.1}" height="{h}" rx="4" fill="#f3f4f9"/><rect x="{left}" y="{y:.1}" width="{w:.1}" height="{h}" rx="4" fill="{fill}"/><text x="{:.1}" y="{:.1}" font-size="12.5" fill="#1c2033" class="mono">{}</text>"##,
        left + plot + 10.0,
        y + h / 2.0 + 4.5,
        esc(value)
    );
}

fn pct_ticks() -> Vec<(f64, String)> {
    (0..=4)
        .map(|i| (i as f64 / 4.0, format!("{}%", i * 25)))
        .collect()
}

/// Ticks for shares up to `max_share` (0..=1); returns (axis max, ticks).
fn share_ticks(max_share: f64) -> (f64, Vec<(f64, String)>) {
    let (top, step) = nice_axis(100.0 * max_share);
    let mut ticks = Vec::new();
    let mut v = 0.0;
    while v <= top + 1e-9 {
        let label = if step < 1.0 {
            format!("{v:.1}%")
        } else {
            format!("{v:.0}%")
        };
        ticks.push((v / top, label));
        v += step;
    }
    (top / 100.0, ticks)
}

fn inline_bar(frac: f64, color: &str) -> String {
    format!(
        r#"<span class="bar"><i style="width:{:.1}%;background:{color}"></i></span>"#,
        100.0 * frac.clamp(0.0, 1.0)
    )
}

fn targets_chips(t: &[EntryTarget]) -> String {
    const SHOWN: usize = 10;
    let mut s = String::new();
    for x in t.iter().take(SHOWN) {
        let _ = write!(
            s,
            r#"<span class="chip{}" title="{} value(s){}">{}<i>{}</i></span>"#,
            if x.direct { "" } else { " via" },
            thousands(x.lookups),
            if x.direct {
                ""
            } else {
                ", through a longer chain"
            },
            esc(&x.text),
            esc(&compact(x.lookups))
        );
    }
    if t.len() > SHOWN {
        let rest: Vec<String> = t[SHOWN..]
            .iter()
            .map(|x| format!("{} ({})", x.text, thousands(x.lookups)))
            .collect();
        let _ = write!(
            s,
            r#"<span class="chip via" title="{}">+{} more</span>"#,
            esc(&rest.join(", ")),
            t.len() - SHOWN
        );
    }
    if t.is_empty() {
        s.push_str(r#"<span class="empty">none</span>"#);
    }
    s
}

/// `12.3k`, `4.5M`.
fn compact(n: u64) -> String {
    let f = n as f64;
    if n < 1000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", f / 1e3)
    } else {
        format!("{:.1}M", f / 1e6)
    }
}

/// A chain for a table cell: the transformations, breakable only between them.
fn chain_cell(names: &[&str]) -> String {
    if names.is_empty() {
        return "[]".into();
    }
    let parts: Vec<String> = names
        .iter()
        .map(|n| format!("<span>{}</span>", esc(n)))
        .collect();
    parts.join("<b>›</b> ")
}

fn td_n(s: &mut String, v: impl std::fmt::Display, text: &str) {
    let _ = write!(s, r#"<td class="n" data-v="{v}">{}</td>"#, esc(text));
}

fn chains_table(rep: &Report, rows: &[&ChainRow]) -> String {
    let mut s = String::from(
        r#"<div class="tw"><table class="sortable"><thead><tr><th>Chain</th><th class="n">Lookups</th><th class="n">Hit ratio</th><th class="n">Misses</th><th class="n">Computed</th><th class="n">From xcache</th><th class="n">Bytes in</th><th class="n">Time</th></tr></thead><tbody>"#,
    );
    for c in rows {
        let _ = write!(
            s,
            r#"<tr><td class="chain mono" title="{}">{}</td>"#,
            esc(&chain_text(&c.names)),
            chain_cell(&c.names)
        );
        td_n(&mut s, c.lookups, &thousands(c.lookups));
        let _ = match c.hit() {
            Some(h) => write!(
                s,
                r#"<td class="n" data-v="{h}">{}{}</td>"#,
                inline_bar(h, ratio_color(h)),
                esc(&fmt_pct(h))
            ),
            None => write!(s, r#"<td class="n" data-v="-1">-</td>"#),
        };
        td_n(&mut s, c.misses, &thousands(c.misses));
        td_n(&mut s, c.computed, &thousands(c.computed));
        td_n(&mut s, c.xcache, &thousands(c.xcache));
        td_n(&mut s, c.bytes_in, &fmt_bytes(c.bytes_in));
        td_n(&mut s, c.nanos, &fmt_ns(c.nanos));
        s.push_str("</tr>");
    }
    let _ = rep;
    s.push_str("</tbody></table></div>");
    s
}

fn rules_table(rep: &Report, rows: &[&RuleRow]) -> String {
    let req = rep.requests.max(1) as f64;
    let max_share = rows.iter().map(|r| r.time_share).fold(0.0, f64::max);
    let mut s = String::from(
        r#"<div class="tw"><table class="sortable"><thead><tr><th class="n">Rule</th><th>Location</th><th>Message</th><th class="n">Share</th><th class="n"><span class="u">µs</span>/req</th><th class="n">Evals</th><th class="n">Op runs</th><th class="n" title="share of values spared by the prefilter">Skipped</th><th class="n">Matches</th></tr></thead><tbody>"#,
    );
    for r in rows {
        let _ = write!(s, r#"<tr><td class="n" data-v="{0}"><b>{0}</b></td>"#, r.id);
        let _ = write!(
            s,
            r#"<td class="loc mono" title="{0}">{1}</td>"#,
            esc(&r.location),
            esc(&shorten(short_location(&r.location), 40))
        );
        let _ = write!(s, r#"<td class="msg" title="{0}">{0}</td>"#, esc(&r.msg));
        let _ = write!(
            s,
            r#"<td class="n" data-v="{}">{}{}</td>"#,
            r.time_share,
            inline_bar(
                if max_share > 0.0 {
                    r.time_share / max_share
                } else {
                    0.0
                },
                "#4f46e5"
            ),
            esc(&fmt_pct(r.time_share))
        );
        let us = r.nanos as f64 / 1000.0 / req;
        td_n(&mut s, us, &format!("{us:.2}"));
        td_n(&mut s, r.evals, &thousands(r.evals));
        td_n(&mut s, r.op_runs, &thousands(r.op_runs));
        if r.has_prefilter {
            td_n(&mut s, r.skip_rate(), &fmt_pct(r.skip_rate()));
        } else {
            let _ = write!(
                s,
                r#"<td class="n" data-v="-1" title="no prefilter: the operator runs on every value"><span class="chip via">none</span></td>"#
            );
        }
        td_n(&mut s, r.matches, &thousands(r.matches));
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>");
    s
}

/// The whole page.
pub fn render(rep: &Report, top: usize) -> String {
    let top = top.max(1);
    let st = &rep.stats;
    let req = rep.requests.max(1) as f64;
    let mut o = String::with_capacity(64 * 1024);
    let title = format!("waf profile — {} requests", thousands(rep.requests as u64));
    let _ = write!(
        o,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>{}</title><style>{CSS}</style></head><body>"#,
        esc(&title)
    );

    // Header.
    let files = &rep.meta.rules_files;
    let rules_desc = match files.len() {
        0 => String::new(),
        1 => esc(short_location(&files[0])),
        n => format!(
            "{} <span style=\"opacity:.7\">+{} more</span>",
            esc(short_location(&files[0])),
            n - 1
        ),
    };
    let corpus_desc: Vec<String> = rep
        .meta
        .corpus_files
        .iter()
        .map(|f| format!("<b>{}</b>", esc(short_location(f))))
        .collect();
    let _ = write!(
        o,
        r#"<header><div class="wrap"><h1>waf profile <span>· where rule evaluation time goes</span></h1><div class="sub">Rules <b>{}</b> ({} rules) · corpus {} · {} request(s) × {} pass(es){}</div><div class="opts">"#,
        rules_desc,
        thousands(rep.rules_total as u64),
        corpus_desc.join(", "),
        thousands(rep.meta.corpus_requests as u64),
        rep.meta.passes,
        if rep.meta.skipped > 0 {
            format!(" · {} skipped", thousands(rep.meta.skipped as u64))
        } else {
            String::new()
        }
    );
    let opt = &rep.meta.options;
    for (name, on) in [
        ("memoization", opt.memo),
        ("prefilter", opt.prefilter),
        ("cross-transaction cache", opt.xcache),
    ] {
        let _ = write!(
            o,
            r#"<span class="{}">{name} {}</span>"#,
            if on { "on" } else { "off" },
            if on { "on" } else { "off" }
        );
    }
    o.push_str("</div></div></header><main class=\"wrap\">");

    // Summary cards.
    o.push_str(r#"<div class="cards">"#);
    card(
        &mut o,
        "Requests",
        &thousands(rep.requests as u64),
        &format!("in {} (instrumented)", fmt_ns(rep.wall.as_nanos() as u64)),
        &badge("#", "#4f46e5"),
    );
    card(
        &mut o,
        "Requests / s",
        &thousands(rep.requests_per_s().round() as u64),
        &format!(
            "{} of rules per request",
            fmt_ns((rep.rule_nanos as f64 / req) as u64)
        ),
        &badge("⚡", "#7c3aed"),
    );
    card(
        &mut o,
        "Memo hit ratio",
        &fmt_pct(rep.memo_hit_ratio),
        &format!("{} lookups", compact(rep.memo_lookups)),
        &donut(rep.memo_hit_ratio, ratio_color(rep.memo_hit_ratio)),
    );
    let skip = st.prefilter_skip_rate();
    card(
        &mut o,
        "Prefilter skip rate",
        &if opt.prefilter {
            fmt_pct(skip)
        } else {
            "off".into()
        },
        &format!("{} operator runs", compact(st.op_runs)),
        &donut(skip, "#0f9f8f"),
    );
    let xr = rep.xcache_hit_ratio();
    card(
        &mut o,
        "Xcache hit ratio",
        &xr.map_or("off".to_string(), fmt_pct),
        &format!("{} outputs reused", compact(rep.xcache_outputs)),
        &donut(xr.unwrap_or(0.0), "#0ea5e9"),
    );
    let transform_share = super::ratio(rep.transform_nanos, rep.rule_nanos);
    card(
        &mut o,
        "In transformations",
        &fmt_pct(transform_share),
        &format!("{} of rule time", fmt_ns(rep.transform_nanos)),
        &donut(transform_share, "#e0a100"),
    );
    let nopf = rep.without_prefilter().count();
    let nopf_run = rep.without_prefilter().filter(|r| r.evals > 0).count();
    card(
        &mut o,
        "Rules without prefilter",
        &thousands(nopf as u64),
        &format!("of {}; {} ran here", rep.rules_total, nopf_run),
        &badge("∅", "#e5484d"),
    );
    let never = rep.never_matched();
    card(
        &mut o,
        "Rules never matched",
        &thousands(never.len() as u64),
        &format!("of {} rules evaluated", rep.rules_evaluated()),
        &badge("0", "#6b7189"),
    );
    o.push_str("</div>");

    // Time per rule.
    let timed: Vec<&RuleRow> = rep.rules.iter().filter(|r| r.evals > 0).take(top).collect();
    let _ = write!(
        o,
        r#"<section><h2>Time per rule</h2><p class="lead">The {} most expensive rules: share of all rule evaluation time ({} in total, {} per request).</p>"#,
        timed.len(),
        fmt_ns(rep.rule_nanos),
        fmt_ns((rep.rule_nanos as f64 / req) as u64)
    );
    if timed.is_empty() {
        o.push_str(r#"<p class="empty">No rule was evaluated.</p>"#);
    } else {
        let max = timed.iter().map(|r| r.time_share).fold(0.0, f64::max);
        let (axis_max, ticks) = share_ticks(max);
        let bars: Vec<Bar> = timed
            .iter()
            .map(|r| Bar {
                label: r.id.to_string(),
                sub: shorten(short_location(&r.location), 46),
                frac: r.time_share / axis_max,
                value: format!(
                    "{} · {} µs/req",
                    fmt_pct(r.time_share),
                    format_args!("{:.2}", r.nanos as f64 / 1000.0 / req)
                ),
                title: format!(
                    "rule {} at {}{}: {} evaluations, {} operator runs, {} matches",
                    r.id,
                    r.location,
                    if r.msg.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", r.msg)
                    },
                    thousands(r.evals),
                    thousands(r.op_runs),
                    thousands(r.matches)
                ),
                color: String::new(),
            })
            .collect();
        o.push_str(&bar_chart(&bars, &ticks, true, "#4f46e5"));
    }
    o.push_str("</section>");

    // Memo hit ratio per chain.
    let chains: Vec<&ChainRow> = rep
        .chains
        .iter()
        .filter(|c| c.lookups > 0)
        .take(top)
        .collect();
    let _ = write!(
        o,
        r#"<section><h2>Memo hit ratio per transform chain</h2><p class="lead">The {} chains with the most lookups: share of the values served at each chain that were already transformed (memo hits). Overall: <b>{}</b>.</p><div class="legend"><span><i style="background:#12a36d"></i>≥ 80%</span><span><i style="background:#e0a100"></i>50–80%</span><span><i style="background:#e5484d"></i>&lt; 50%</span></div>"#,
        chains.len(),
        esc(&fmt_pct(rep.memo_hit_ratio))
    );
    if chains.is_empty() {
        o.push_str(r#"<p class="empty">No value was looked up.</p>"#);
    } else {
        let bars: Vec<Bar> = chains
            .iter()
            .map(|c| Bar {
                label: shorten(&chain_text(&c.names), 110),
                sub: format!("{} lookups", thousands(c.lookups)),
                frac: c.hit_ratio,
                value: format!("{} hit", fmt_pct(c.hit_ratio)),
                title: format!(
                    "{}: {} lookups, {} misses, {} transformations, {} from the cross-transaction cache",
                    chain_text(&c.names),
                    thousands(c.lookups),
                    thousands(c.misses),
                    thousands(c.computed),
                    thousands(c.xcache)
                ),
                color: ratio_color(c.hit_ratio).to_string(),
            })
            .collect();
        o.push_str(&bar_chart(&bars, &pct_ticks(), false, "#12a36d"));
    }
    o.push_str("</section>");

    // Hot entries.
    let hot: Vec<_> = rep.hot.iter().take(top).collect();
    let _ = write!(
        o,
        r#"<section><h2>Hot entries</h2><p class="lead">Transform chains with the targets whose values they transform, by time spent in the chain's last transformation ({} in all transformations, {} applications).</p>"#,
        fmt_ns(rep.transform_nanos),
        thousands(rep.transform_apps)
    );
    if hot.is_empty() {
        o.push_str(r#"<p class="empty">No transformation ran.</p>"#);
    } else {
        let max = hot.iter().map(|h| h.time_share).fold(0.0, f64::max);
        let (axis_max, ticks) = share_ticks(max);
        let bars: Vec<Bar> = hot
            .iter()
            .map(|h| {
                let c = rep.chain(h);
                let label = shorten(&chain_text(&c.names), 80);
                let room = 150usize.saturating_sub(label.chars().count());
                Bar {
                    sub: shorten(&super::targets_text(&h.targets, 6), room.max(20)),
                    label,
                    frac: h.time_share / axis_max,
                    value: format!("{} · {}", fmt_pct(h.time_share), fmt_ns(c.nanos)),
                    title: format!(
                        "{} {}: {} applications on {}",
                        chain_text(&c.names),
                        super::targets_text(&h.targets, usize::MAX),
                        thousands(c.computed),
                        fmt_bytes(c.bytes_in)
                    ),
                    color: String::new(),
                }
            })
            .collect();
        o.push_str(&bar_chart(&bars, &ticks, false, "#0f9f8f"));
        o.push_str(
            r#"<div class="legend" style="margin-top:14px"><span><i style="background:#eef0fb;border:1px solid #c7cbf0"></i>target read at this chain</span><span><i style="background:#f2f3f6;border:1px solid #d5d7e0"></i>read through a longer chain</span><span>numbers: values served</span></div>"#,
        );
        o.push_str(
            r#"<div class="tw"><table class="sortable"><thead><tr><th class="n">#</th><th>Chain</th><th>Targets (values served)</th><th class="n">Time</th><th class="n">Share</th><th class="n">Applications</th><th class="n">Bytes in</th><th class="n">Hit ratio</th></tr></thead><tbody>"#,
        );
        for (i, h) in hot.iter().enumerate() {
            let c = rep.chain(h);
            let _ = write!(
                o,
                r#"<tr><td class="n" data-v="{0}">{0}</td><td class="chain mono" title="{1}">{2}</td><td>{3}</td>"#,
                i + 1,
                esc(&chain_text(&c.names)),
                chain_cell(&c.names),
                targets_chips(&h.targets)
            );
            td_n(&mut o, c.nanos, &fmt_ns(c.nanos));
            td_n(&mut o, h.time_share, &fmt_pct(h.time_share));
            td_n(&mut o, c.computed, &thousands(c.computed));
            td_n(&mut o, c.bytes_in, &fmt_bytes(c.bytes_in));
            td_n(&mut o, c.hit().unwrap_or(-1.0), &c.hit_text());
            o.push_str("</tr>");
        }
        o.push_str("</tbody></table></div>");
    }
    o.push_str("</section>");

    // Rules table.
    let _ = write!(
        o,
        r#"<section><h2>Rules by time</h2><p class="lead">Top {} of {} rules evaluated. <i>Skipped</i>: share of the values the rule's operators were spared by the prefilter. Click a column to sort.</p>{}</section>"#,
        timed.len(),
        rep.rules_evaluated(),
        rules_table(rep, &timed)
    );

    // Chains table.
    let _ = write!(
        o,
        r#"<section><h2>Transform chains</h2><p class="lead">Top {} of {} chains by lookups.</p>{}</section>"#,
        chains.len(),
        rep.chains.len(),
        chains_table(rep, &chains)
    );

    // Rules without prefilter.
    let nopf_rows: Vec<&RuleRow> = rep.without_prefilter().collect();
    let _ = write!(
        o,
        r#"<section><h2>Rules without prefilter <span style="color:var(--muted);font-weight:400">({}, {} evaluated here)</span></h2><p class="lead">Rules with a (non-negated) operator that has no sound prefilter literal: it runs on every value of its targets. Most expensive first.</p>"#,
        nopf_rows.len(),
        nopf_run
    );
    if nopf_rows.is_empty() {
        o.push_str(r#"<p class="empty">Every operator is gated by the prefilter.</p>"#);
    } else {
        o.push_str(r#"<div class="tw"><table class="sortable"><thead><tr><th class="n">Rule</th><th>Operators</th><th>Location</th><th class="n">Time share</th><th class="n">Operator runs</th><th class="n">Evaluations</th></tr></thead><tbody>"#);
        for r in nopf_rows.iter().take(top) {
            let _ = write!(
                o,
                r#"<tr><td class="n" data-v="{0}"><b>{0}</b></td><td class="mono">{1}</td><td class="loc mono" title="{2}">{3}</td>"#,
                r.id,
                esc(&r.ungated_ops.join(" ")),
                esc(&r.location),
                esc(&shorten(short_location(&r.location), 40))
            );
            td_n(&mut o, r.time_share, &fmt_pct(r.time_share));
            td_n(&mut o, r.op_runs, &thousands(r.op_runs));
            td_n(&mut o, r.evals, &thousands(r.evals));
            o.push_str("</tr>");
        }
        o.push_str("</tbody></table></div>");
        if nopf_rows.len() > top {
            let _ = write!(
                o,
                r#"<details><summary>All {} rules without prefilter</summary><p class="ids">"#,
                nopf_rows.len()
            );
            for r in &nopf_rows {
                let _ = write!(
                    o,
                    r#"<span class="chip" title="{}">{}</span>"#,
                    esc(&format!("{} {}", r.ungated_ops.join(" "), r.location)),
                    r.id
                );
            }
            o.push_str("</p></details>");
        }
    }
    o.push_str("</section>");

    // Never matched.
    let _ = write!(
        o,
        r#"<section><h2>Rules never matched <span style="color:var(--muted);font-weight:400">({} of {} evaluated)</span></h2><p class="lead">Evaluated on this corpus and never matched (SecActions excluded), in file order; hover for the location.</p><p class="ids">"#,
        never.len(),
        rep.rules_evaluated()
    );
    if never.is_empty() {
        o.push_str(r#"<span class="empty">Every evaluated rule matched at least once.</span>"#);
    }
    for r in &never {
        let _ = write!(
            o,
            r#"<span class="chip" title="{}">{}</span>"#,
            esc(&format!(
                "{} · {} evaluations",
                r.location,
                thousands(r.evals)
            )),
            r.id
        );
    }
    o.push_str("</p></section>");

    // How to read.
    let _ = write!(
        o,
        r#"<section><h2>How to read this</h2><dl class="defs">
<dt>Chain</dt><dd>A node of the compiler's transform prefix tree: the transformations applied, first to last (<span class="mono">[]</span> is the raw value). Rules sharing a prefix share its work.</dd>
<dt>Lookups</dt><dd>Values served to rules at a chain (every value of every target each time a rule reads it).</dd>
<dt>Hit ratio</dt><dd>1 − misses / lookups: the share of lookups whose value was already transformed in this transaction. Without memoization every lookup is a miss.</dd>
<dt>Computed / applications</dt><dd>Times the chain's last transformation ran (also on the way to a longer chain); <i>from xcache</i>: outputs reused from earlier requests instead.</dd>
<dt>Hot entry</dt><dd>A chain and the targets whose values pass through it (at this chain or a longer one); its time is the time of its last transformation.</dd>
<dt>Prefilter skip rate</dt><dd>Share of (operator, value) tests avoided because none of the operator's literals occurs in the value.</dd>
<dt>Times</dt><dd>Measured with the profiler on (two clock reads per rule and per transformation): compare shares, not absolute numbers, with <span class="mono">waf bench</span>. Overall engine counters: {} operator runs, {} regex evaluations, {} prefilter scans.</dd>
</dl></section>"#,
        thousands(st.op_runs),
        thousands(st.regex_evals),
        thousands(st.scans)
    );
    let _ = write!(
        o,
        r#"</main><footer>Generated by <b>waf profile</b> · {} rule file(s) · self-contained page, no external resources</footer><script>{JS}</script></body></html>"#,
        files.len()
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(esc("a\u{1}b"), "a\u{FFFD}b");
    }

    #[test]
    fn axes_are_nice() {
        assert_eq!(nice_axis(8.5), (10.0, 2.0));
        assert_eq!(nice_axis(0.42), (0.5, 0.1));
        assert_eq!(nice_axis(23.0), (25.0, 5.0));
        assert_eq!(shorten("abcdefghij", 7), "ab…ghij");
        assert_eq!(
            short_location("/a/b/REQUEST-942.conf:12"),
            "REQUEST-942.conf:12"
        );
    }
}
