//! docs/architecture.md's crate table tells the truth: every crate of the workspace has a row,
//! its "Depends on" column names exactly the `clef-*` crates its `Cargo.toml` depends on (by the
//! part after `clef-`), and every other crate it names is a dependency too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The crate table: crate name → the names its "Depends on" cell lists. Each comma- or
/// semicolon-separated item names one crate by its first word (what follows, such as "with
/// feature `cli`" or a parenthesis, qualifies it); `—` names none.
fn table(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut rows = BTreeMap::new();
    let start = doc
        .find("| Crate | Depends on | Owns |")
        .expect("the crate table");
    for line in doc[start..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_string();
        let mut deps = BTreeSet::new();
        let mut depth = 0;
        let mut item = String::new();
        // split at commas and semicolons outside parentheses
        for ch in cells[2].chars().chain([',']) {
            match ch {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' | ';' if depth == 0 => {
                    let first = item.split_whitespace().next().unwrap_or("");
                    let first = first.trim_matches('`');
                    if !first.is_empty() && first != "—" {
                        deps.insert(first.to_string());
                    }
                    item.clear();
                    continue;
                }
                _ => {}
            }
            if depth == 0 && ch != ')' {
                item.push(ch);
            }
        }
        rows.insert(name, deps);
    }
    rows
}

/// The names in a `Cargo.toml`'s `[dependencies]` section (optional ones included).
fn dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut deps = BTreeSet::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap().trim();
            deps.insert(name.to_string());
        }
    }
    deps
}

#[test]
fn the_crate_table_matches_every_cargo_toml() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let rows = table(&doc);
    let mut crates: Vec<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| root().join("crates").join(n).join("Cargo.toml").is_file())
        .collect();
    crates.sort();
    let mut wrong = Vec::new();
    for krate in &crates {
        let Some(named) = rows.get(krate) else {
            wrong.push(format!("{krate}: no row"));
            continue;
        };
        let deps = dependencies(&root().join("crates").join(krate).join("Cargo.toml"));
        let internal: BTreeSet<String> = deps
            .iter()
            .filter_map(|d| d.strip_prefix("clef-").map(str::to_string))
            .collect();
        let named_internal: BTreeSet<String> = named
            .iter()
            .filter(|n| crates.contains(&format!("clef-{n}")))
            .cloned()
            .collect();
        if internal != named_internal {
            wrong.push(format!(
                "{krate}: Cargo.toml depends on {internal:?}, the table says {named_internal:?}"
            ));
        }
        for n in named.difference(&named_internal) {
            if !deps.contains(n) {
                wrong.push(format!("{krate}: the table names {n}, not a dependency"));
            }
        }
    }
    for name in rows.keys() {
        if !crates.contains(name) {
            wrong.push(format!("{name}: a row for no crate"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md, crate table:\n{}",
        wrong.join("\n")
    );
}

/// The parser reads what the table writes (so that a row it misreads cannot pass).
#[test]
fn cells_are_read_item_by_item() {
    let doc = "| Crate | Depends on | Owns |\n|---|---|---|\n\
               | `a` | api, engine (no other `clef-*` crate); faer with feature `calibrate` | x |\n\
               | `b` | — | y |\n";
    let rows = table(doc);
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(rows["a"], names(&["api", "engine", "faer"]));
    assert!(rows["b"].is_empty());
}
