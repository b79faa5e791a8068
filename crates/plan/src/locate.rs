//! Finds the line of a key path (`workloads[2].ramp`) in TOML text, for error messages.

use toml_edit::{ImDocument, Item};

pub enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

/// Line of the deepest segment of `path` that exists in `text` (None if the text does not
/// parse or not even the first segment exists).
pub fn locate(text: &str, path: &[Seg]) -> Option<usize> {
    let doc = ImDocument::parse(text).ok()?;
    walk(text, doc.as_item(), path, None)
}

fn walk(text: &str, item: &Item, path: &[Seg], best: Option<usize>) -> Option<usize> {
    let Some((seg, rest)) = path.split_first() else {
        return best;
    };
    let at = |span: Option<std::ops::Range<usize>>| span.map(|s| line_of(text, s.start));
    match seg {
        Seg::Key(k) => match item.as_table_like().and_then(|t| t.get_key_value(k)) {
            Some((key, next)) => walk(text, next, rest, at(key.span()).or(at(next.span())).or(best)),
            None => best,
        },
        Seg::Index(i) => {
            if let Some(table) = item.as_array_of_tables().and_then(|a| a.get(*i)) {
                // Array-of-tables entries are tables, not items: continue with the keys inside.
                let line = at(table.span()).or(best);
                match rest.split_first() {
                    Some((Seg::Key(k), rest)) => match table.get_key_value(k) {
                        Some((key, next)) => walk(text, next, rest, at(key.span()).or(line)),
                        None => line,
                    },
                    _ => line,
                }
            } else {
                item.as_array().and_then(|a| a.get(*i)).and_then(|v| at(v.span())).or(best)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "name = \"x\"\n\n[defaults]\nramp = [1, 2]\n\n[[workloads]]\nname = \"a\"\n\n[[workloads]]\nname = \"b\"\nqueue_depth = 0\n";

    #[test]
    fn finds_keys_in_tables_and_arrays_of_tables() {
        assert_eq!(locate(TEXT, &[Seg::Key("name")]), Some(1));
        assert_eq!(locate(TEXT, &[Seg::Key("defaults"), Seg::Key("ramp")]), Some(4));
        assert_eq!(locate(TEXT, &[Seg::Key("workloads"), Seg::Index(1), Seg::Key("queue_depth")]), Some(11));
        assert_eq!(locate(TEXT, &[Seg::Key("workloads"), Seg::Index(0), Seg::Key("name")]), Some(7));
    }

    #[test]
    fn falls_back_to_the_closest_existing_parent() {
        assert_eq!(locate(TEXT, &[Seg::Key("workloads"), Seg::Index(1), Seg::Key("ramp")]), Some(9));
        assert_eq!(locate(TEXT, &[Seg::Key("nothing")]), None);
    }
}
