//! A site's own block page (the manifest's `block_page`): what a client the
//! rules block sees instead of the proxy's two lines of text, as an
//! operator's branded "request blocked" page with the request's id to
//! quote to support.
//!
//! The file is read when the manifest is (a reload reads it again, and a
//! change to it reloads). `{{unique_id}}` and `{{status}}` are replaced by
//! the request's id and the response status; anything else between braces
//! stays as written (a page's own scripts may use them).

use bytes::Bytes;
use hyper::header::HeaderValue;
use std::path::{Path, PathBuf};

/// The largest block page read: it is held in memory by every site that
/// names it and sent whole.
pub(crate) const MAX_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(Bytes),
    UniqueId,
    Status,
}

/// A block page, split at its placeholders.
#[derive(Debug)]
pub(crate) struct BlockPage {
    pub(crate) path: PathBuf,
    pub(crate) content_type: HeaderValue,
    parts: Vec<Part>,
}

impl BlockPage {
    /// Reads `path`; the content type follows its extension (`.html` and
    /// `.htm`: HTML, `.json`: JSON, anything else: plain text).
    pub(crate) fn load(path: &Path) -> Result<BlockPage, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.len() > MAX_BYTES {
            return Err(format!(
                "{}: {} bytes; a block page has at most {MAX_BYTES}",
                path.display(),
                meta.len()
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let content_type = match ext.as_deref() {
            Some("html" | "htm") => "text/html; charset=utf-8",
            Some("json") => "application/json",
            _ => "text/plain; charset=utf-8",
        };
        Ok(BlockPage {
            path: path.to_path_buf(),
            content_type: HeaderValue::from_static(content_type),
            parts: split(&bytes),
        })
    }

    /// The page for a request blocked with `status`, whose id is
    /// `unique_id` (see [`safe_id`]: the page may be HTML or JSON).
    pub(crate) fn render(&self, status: u16, unique_id: &str) -> Bytes {
        if let [Part::Text(t)] = self.parts.as_slice() {
            return t.clone();
        }
        let mut out = Vec::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.extend_from_slice(t),
                Part::UniqueId => out.extend(safe_id(unique_id)),
                Part::Status => out.extend_from_slice(status.to_string().as_bytes()),
            }
        }
        Bytes::from(out)
    }
}

const PLACEHOLDERS: [(&[u8], Part); 2] = [
    (b"{{unique_id}}", Part::UniqueId),
    (b"{{status}}", Part::Status),
];

/// The page's text and placeholders, in order.
fn split(bytes: &[u8]) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut text_start = 0;
    let mut i = 0;
    while let Some(off) = memchr::memmem::find(&bytes[i..], b"{{") {
        let at = i + off;
        match PLACEHOLDERS
            .iter()
            .find(|(p, _)| bytes[at..].starts_with(p))
        {
            Some((p, part)) => {
                if text_start < at {
                    parts.push(Part::Text(Bytes::copy_from_slice(&bytes[text_start..at])));
                }
                parts.push(part.clone());
                i = at + p.len();
                text_start = i;
            }
            None => i = at + 2,
        }
    }
    if text_start < bytes.len() || parts.is_empty() {
        parts.push(Part::Text(Bytes::copy_from_slice(&bytes[text_start..])));
    }
    parts
}

/// The id as the page may show it: the engine's ids are letters and
/// digits; anything else (none of which HTML or JSON would need escaped
/// then) is left out.
fn safe_id(id: &str) -> impl Iterator<Item = u8> + '_ {
    id.bytes()
        .filter(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &str, name: &str) -> BlockPage {
        let dir = std::env::temp_dir().join(format!("waf-block-page-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
        BlockPage::load(&p).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn placeholders_are_filled_and_other_braces_kept() {
        let p = page(
            "<p>Blocked ({{status}}). Quote {{unique_id}}.</p><script>let t = '{{x}}';{{</script>{{status}}",
            "a.html",
        );
        assert_eq!(p.content_type, "text/html; charset=utf-8");
        let out = p.render(403, "aB3<&\"-9");
        assert_eq!(
            &out[..],
            b"<p>Blocked (403). Quote aB3-9.</p><script>let t = '{{x}}';{{</script>403"
        );
    }

    #[test]
    fn a_page_without_placeholders_is_sent_as_is() {
        let p = page("{\"blocked\": true}", "b.json");
        assert_eq!(p.content_type, "application/json");
        assert_eq!(&p.render(418, "x")[..], b"{\"blocked\": true}");
        let empty = page("", "c.txt");
        assert_eq!(&empty.render(403, "x")[..], b"");
        assert_eq!(empty.content_type, "text/plain; charset=utf-8");
    }

    #[test]
    fn missing_and_huge_pages_are_refused() {
        assert!(BlockPage::load(Path::new("/nonexistent/page.html")).is_err());
        let dir = std::env::temp_dir().join(format!("waf-block-page-big-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = dir.join("big.html");
        std::fs::write(&p, vec![b'a'; MAX_BYTES as usize + 1]).unwrap_or_else(|e| panic!("{e}"));
        let e = BlockPage::load(&p).err().unwrap_or_default();
        assert!(e.contains("a block page has at most"), "{e}");
    }
}
