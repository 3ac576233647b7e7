//! Imports point down: no module of `src/` reaches another that reaches it back, directly or
//! through others. A module may use its ancestors' items and its own submodules' (Rust's
//! `super::` and re-exports); every other edge — `use`, a path in code, a path inside a
//! macro's arguments — must leave the graph without a circle. Read from the source with syn;
//! test code (`#[cfg(test)]`, `#[cfg(all(test, …))]`) is left out. The library's root is
//! `crate`, the command line's (`main.rs`, `cli/`) is `main`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

type Module = Vec<String>;

/// Every file module of `src/`: its path (`crate::models::bert`) and file.
fn file_modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut modules = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            let root = if parts[0] == "main" || parts[0] == "cli" { "main" } else { "crate" };
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                parts.pop();
            }
            modules.insert(std::iter::once(root.to_string()).chain(parts).collect(), path);
        }
    }
    modules
}

/// Whether an item's attributes compile it for tests only.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(cfg) if cfg.path.is_ident("cfg") => {
            let condition = cfg.tokens.to_string();
            condition.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == "test") && !condition.contains("not (test")
        }
        _ => false,
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The module paths one file names: each `crate::`, `super::` or `self::` path made absolute.
struct Paths {
    /// Where the visitor is: the file's module, then any inline modules it is inside.
    at: Module,
    found: BTreeSet<Module>,
}

impl Paths {
    fn add(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else { return };
        let mut absolute = match first.as_str() {
            "crate" => vec![self.at[0].clone()],
            "self" => self.at.clone(),
            "super" => self.at[..self.at.len() - 1].to_vec(),
            _ => return,
        };
        let mut rest = &segments[1..];
        while rest.first().is_some_and(|s| s == "super") {
            absolute.pop();
            rest = &rest[1..];
        }
        absolute.extend(rest.iter().cloned());
        self.found.insert(absolute);
    }

    fn add_use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.add_use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.add(&[&prefix[..], &[n.ident.to_string()]].concat()),
            syn::UseTree::Rename(r) => self.add(&[&prefix[..], &[r.ident.to_string()]].concat()),
            syn::UseTree::Glob(_) => self.add(prefix),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.add_use_tree(prefix, t)),
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !test_only(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        self.at.push(module.ident.to_string());
        syn::visit::visit_item_mod(self, module);
        self.at.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.add_use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.add(&path.segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>());
        syn::visit::visit_path(self, path);
    }

    /// A macro's arguments are tokens, not syntax: `crate :: a :: b` runs in them are paths.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let text = mac.tokens.to_string();
        let words: Vec<&str> = text.split_whitespace().collect();
        for (i, word) in words.iter().enumerate() {
            if matches!(*word, "crate" | "super" | "self") && (i == 0 || words[i - 1] != "::") {
                let mut segments = vec![word.to_string()];
                let mut j = i + 1;
                while j + 1 < words.len() && words[j] == "::" && words[j + 1].chars().all(|c| c.is_alphanumeric() || c == '_') {
                    segments.push(words[j + 1].to_string());
                    j += 2;
                }
                self.add(&segments);
            }
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// `a` is `b` or one of its ancestors.
fn within(a: &Module, b: &Module) -> bool {
    b.starts_with(a)
}

/// Each file module's edges to the other file modules it names (ancestors and descendants
/// left out).
fn import_graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = file_modules(src);
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut paths = Paths { at: module.clone(), found: BTreeSet::new() };
        paths.visit_file(&syntax);
        let edges = paths
            .found
            .iter()
            .filter_map(|path| (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|prefix| modules.contains_key(prefix)))
            .filter(|target| !within(target, module) && !within(module, target))
            .collect();
        graph.insert(module.clone(), edges);
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        circles: Vec<Vec<Module>>,
    }
    fn connect<'g>(s: &mut State<'g>, v: &'g Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        for w in &s.graph[v] {
            if !s.index.contains_key(w) {
                connect(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.stack.contains(&w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let at = s.stack.iter().position(|m| *m == v).unwrap();
            let component: Vec<Module> = s.stack.drain(at..).cloned().collect();
            if component.len() > 1 {
                s.circles.push(component);
            }
        }
    }
    let mut state = State { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), circles: Vec::new() };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            connect(&mut state, v);
        }
    }
    state.circles
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = import_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.len() > 100, "read {} modules", graph.len());
    let mut report = String::new();
    for circle in circles(&graph) {
        report += &format!("a circle of {} modules:\n", circle.len());
        for from in &circle {
            for to in graph[from].iter().filter(|to| circle.contains(to)) {
                report += &format!("    {} -> {}\n", from.join("::"), to.join("::"));
            }
        }
    }
    assert!(report.is_empty(), "{report}");
}

#[test]
fn the_graph_sees_every_kind_of_path() {
    let text = "use super::{a, b::c};\nuse crate::d::*;\nfn f() { crate::e::g(); vec![crate::h::i()]; }\n#[cfg(test)]\nmod tests { use crate::j; }";
    let mut paths = Paths { at: vec!["crate".into(), "x".into(), "y".into()], found: BTreeSet::new() };
    paths.visit_file(&syn::parse_file(text).unwrap());
    let found: Vec<String> = paths.found.iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["crate::d", "crate::e::g", "crate::h::i", "crate::x::a", "crate::x::b::c"]);
}
