//! Where a key is written in a study file, for error messages.

/// The 1-based line where `key` is written: `key =`, `"key" =`, `[key]`, `[search."key"]`, or
/// the last segment of a dotted key followed by `=`. A key that starts with a section name
/// (`pruner.kind`) is looked for inside that section first.
pub fn line_of(text: &str, key: &str) -> Option<usize> {
    let bare = key.replace('"', "");
    let lines: Vec<&str> = text.lines().collect();
    let section = bare.split('.').next().unwrap_or("");
    let header = lines.iter().position(|l| {
        let l = l.trim();
        l == format!("[{section}]") || l.starts_with(&format!("[{section}."))
    });
    let range = match header {
        Some(h) if bare.contains('.') => {
            let end = lines[h + 1..]
                .iter()
                .position(|l| {
                    let l = l.trim_start();
                    l.starts_with('[') && !l.starts_with(&format!("[{section}"))
                })
                .map_or(lines.len(), |e| h + 1 + e);
            h..end
        }
        _ => 0..lines.len(),
    };
    if bare == section
        && let Some(h) = header
    {
        return Some(h + 1);
    }
    let last = bare.rsplit('.').next().unwrap_or(&bare).to_owned();
    let inner = key
        .split_once(".\"")
        .map(|(_, rest)| rest.trim_end_matches('"').to_owned());
    let unsectioned = bare.split_once('.').map(|(_, rest)| rest.to_owned());
    let candidates: Vec<String> = [Some(bare.clone()), inner, unsectioned, Some(last)]
        .into_iter()
        .flatten()
        .collect();
    for c in &candidates {
        for i in range.clone() {
            let l = lines[i].trim_start().trim_start_matches('[');
            for form in [c.clone(), format!("\"{c}\""), format!("search.\"{c}\"")] {
                if let Some(rest) = l.strip_prefix(&form) {
                    let rest = rest.trim_start();
                    if rest.starts_with('=') || rest.starts_with(']') {
                        return Some(i + 1);
                    }
                }
            }
        }
    }
    None
}

/// The key written on 1-based `line` (`sampler.kind` for `kind = "cmaes"` under `[sampler]`),
/// for errors that come with a position but no key (a wrong type, an unknown name).
pub fn key_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let here = lines.get(line.checked_sub(1)?)?.trim();
    if here.starts_with('[') {
        return Some(
            here.trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_owned(),
        );
    }
    let (key, _) = here.split_once('=')?;
    let key = key.trim();
    if key.is_empty() || key.starts_with('#') {
        return None;
    }
    let section = lines[..line - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| l.starts_with('[') && !l.starts_with("[["))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned());
    Some(match section {
        Some(s) => format!("{s}.{key}"),
        None => key.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_on_a_line_names_its_section() {
        let text = "[study]\nname = \"x\"\n\n[sampler]\nkind = \"cmaes\"\n# note\n";
        assert_eq!(key_at(text, 5).as_deref(), Some("sampler.kind"));
        assert_eq!(key_at(text, 2).as_deref(), Some("study.name"));
        assert_eq!(key_at(text, 4).as_deref(), Some("sampler"));
        assert_eq!(key_at(text, 6), None);
        assert_eq!(key_at(text, 99), None);
        assert_eq!(line_of(text, "sampler.kind"), Some(5));
    }
}
