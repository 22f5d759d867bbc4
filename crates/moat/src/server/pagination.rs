//! Opaque cursors for the list methods. A cursor encodes a position and which list it
//! belongs to; anything else a client sends back is refused with -32602.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use moat_protocol::ErrorObject;

/// Decode `cursor` for `list` ("tools", "resources", …) into an offset.
pub(crate) fn decode(cursor: Option<&str>, list: &str) -> Result<usize, ErrorObject> {
    let Some(cursor) = cursor else { return Ok(0) };
    let bad = || {
        ErrorObject::invalid_params(format!(
            "Invalid params: cursor {cursor:?} is not one this server issued"
        ))
    };
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let (kind, offset) = text.split_once(':').ok_or_else(bad)?;
    if kind != list {
        return Err(bad());
    }
    offset.parse().map_err(|_| bad())
}

/// Encode a position in `list` as an opaque cursor.
pub(crate) fn encode(list: &str, offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("{list}:{offset}"))
}

/// One page of `items` starting at the cursor, and the cursor for the next page.
pub(crate) fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    list: &str,
    page_size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorObject> {
    let (range, next) = page_range(items.len(), cursor, list, page_size)?;
    Ok((items[range].to_vec(), next))
}

/// Which of `len` items the page at the cursor holds, and the cursor for the next page
/// (for lists whose items are converted as they are taken).
pub(crate) fn page_range(
    len: usize,
    cursor: Option<&str>,
    list: &str,
    page_size: usize,
) -> Result<(std::ops::Range<usize>, Option<String>), ErrorObject> {
    let start = decode(cursor, list)?;
    if start > len {
        return Err(ErrorObject::invalid_params(
            "Invalid params: cursor is past the end of the list",
        ));
    }
    let end = start.saturating_add(page_size.max(1)).min(len);
    let next = (end < len).then(|| encode(list, end));
    Ok((start..end, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_through_and_refuses_foreign_cursors() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(&items, None, "tools", 2).unwrap();
        assert_eq!(first, vec![0, 1]);
        let (second, next) = page(&items, next.as_deref(), "tools", 2).unwrap();
        assert_eq!(second, vec![2, 3]);
        let (last, next) = page(&items, next.as_deref(), "tools", 2).unwrap();
        assert_eq!(last, vec![4]);
        assert!(next.is_none());
        assert!(page(&items, Some("garbage!"), "tools", 2).is_err());
        assert!(page(&items, Some(&encode("prompts", 1)), "tools", 2).is_err());
        assert!(page(&items, Some(&encode("tools", 99)), "tools", 2).is_err());
    }
}
