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
