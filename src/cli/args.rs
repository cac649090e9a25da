//! A tiny `--flag value` (or `--flag=value`) parser: no dependency, errors that say what
//! was expected.

use std::collections::BTreeMap;

/// Parsed flags: `--name value` pairs and bare `--switch`es.
#[derive(Debug, Default)]
pub struct Args {
    values: BTreeMap<String, String>,
    switches: Vec<String>,
}

impl Args {
    /// Parses `argv` (after the subcommand). `switch_names` take no value.
    pub fn parse(
        argv: &[String],
        value_names: &[&str],
        switch_names: &[&str],
    ) -> Result<Args, String> {
        let mut args = Args::default();
        let mut it = argv.iter();
        while let Some(a) = it.next() {
            let flag = a
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument '{a}'; options start with --"))?;
            // `--name=value` as well as `--name value`.
            let (name, inline) = match flag.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (flag, None),
            };
            if switch_names.contains(&name) {
                if inline.is_some() {
                    return Err(format!("--{name} takes no value"));
                }
                args.switches.push(name.to_string());
            } else if value_names.contains(&name) {
                let v = match inline {
                    Some(v) => v,
                    None => it
                        .next()
                        .cloned()
                        .ok_or_else(|| format!("--{name} needs a value"))?,
                };
                if args.values.insert(name.to_string(), v).is_some() {
                    return Err(format!("--{name} given twice"));
                }
            } else {
                let mut known: Vec<String> = value_names
                    .iter()
                    .chain(switch_names)
                    .map(|n| format!("--{n}"))
                    .collect();
                known.sort();
                return Err(format!(
                    "unknown option '--{name}'; known: {}",
                    known.join(", ")
                ));
            }
        }
        Ok(args)
    }

    /// Value of `--name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Value of `--name`, required.
    pub fn require(&self, name: &str) -> Result<&str, String> {
        self.get(name)
            .ok_or_else(|| format!("--{name} is required"))
    }

    /// Whether `--name` was given.
    pub fn has(&self, name: &str) -> bool {
        self.switches.iter().any(|s| s == name)
    }

    /// Parses `--name` as a number.
    pub fn number<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("--{name} expects a number, got '{v}'")),
        }
    }
}
