//! The one duration syntax for keys declared in milliseconds. Every
//! `*_millis: u64` key of `config_struct!` is also a key without the suffix
//! that takes a duration: `heartbeat-timeout = "6s"` in a file,
//! `--heartbeat-timeout 6s` as a flag. The `-millis` spelling keeps taking
//! integer milliseconds. One source (a file, or the command line) may set
//! a key in one spelling only; across sources the usual precedence holds
//! whatever the spelling (a flag wins over the file).
//!
//! Which keys have the spelling is decided here, from the field's name and
//! type (`duration_key_of`), so a `*_millis: u64` key declared later gets it
//! without anything else to write.

use crate::clock::text::{millis_of, DurationError};
use crate::config::{ConfigOptions, Invalid};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use std::any::TypeId;
use std::collections::BTreeSet;
use std::fmt;
use std::marker::PhantomData;

/// What a duration looks like, for messages and help.
pub const SYNTAX: &str = "250ms, 30s, 5m, 1h, 7d";

/// The duration spelling of the config field `field` (snake case, as
/// declared): `heartbeat_timeout_millis: u64` is also `heartbeat-timeout`,
/// or `named` when the declaration gives a name (`#[duration_key = "…"]`,
/// for a stem that is already another key). `None` for any other field.
pub fn duration_key_of<T: 'static>(field: &str, named: Option<&str>) -> Option<String> {
    let stem = field.strip_suffix("_millis")?;
    (TypeId::of::<T>() == TypeId::of::<u64>())
        .then(|| named.map_or_else(|| stem.replace('_', "-"), str::to_string))
}

/// True for a field that has a duration spelling: its `-millis` flag is
/// hidden from `--help`, which shows the duration flag instead.
pub fn is_millis_field<T: 'static>(field: &str) -> bool {
    duration_key_of::<T>(field, None).is_some()
}

/// The duration spelling of `-millis` key `millis_key` of `O`.
fn short_of<O: ConfigOptions>(millis_key: &str) -> Option<String> {
    O::duration_keys()
        .into_iter()
        .find(|(_, m)| m == millis_key)
        .map(|(key, _)| key)
}

/// The `-millis` key whose duration spelling is `key`.
fn millis_key_of<O: ConfigOptions>(key: &str) -> Option<String> {
    O::duration_keys()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, millis_key)| millis_key)
}

/// Parses a duration: a whole number and one unit (`ms`, `s`, `m`, `h`,
/// `d`), in milliseconds. A bare number is refused: in a key without
/// `-millis` it could mean any unit.
pub fn parse(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bare_number(t));
    }
    millis_of(t, 1).map_err(|e| match e {
        DurationError::TooLong => format!("{text:?} is too long"),
        DurationError::Invalid(_) => format!("{text:?} is not a duration (use {SYNTAX})"),
    })
}

fn bare_number(number: &str) -> String {
    format!("{number:?} has no unit: write {number}ms for milliseconds (units: ms, s, m, h, d)")
}

/// A number where a duration string belongs (`heartbeat-timeout = 6000`).
fn unquoted(number: impl fmt::Display) -> String {
    format!("{number} has no unit: write \"{number}ms\" for milliseconds (a duration is a string: {SYNTAX})")
}

/// What one source wrote in the duration spelling.
pub struct Durations<O> {
    /// Duration flags as parsed (`--heartbeat-timeout 6s` is
    /// `("heartbeat-timeout", 6000)`), until `fold` moves each into its
    /// `-millis` key. A file's are moved while it is read.
    flags: Vec<(String, u64)>,
    /// The `-millis` keys whose value was written in the duration spelling:
    /// an error about one names the key as the user wrote it.
    spelled: BTreeSet<String>,
    options: PhantomData<fn() -> O>,
}

impl<O: ConfigOptions> Durations<O> {
    /// `key` as this source wrote it: a `-millis` key set in the duration
    /// spelling is named by that spelling.
    pub fn written(&self, key: String) -> String {
        match short_of::<O>(&key) {
            Some(short) if self.spelled.contains(&key) => short,
            _ => key,
        }
    }

    /// The duration flags given and not yet folded, by key.
    pub fn flag_keys(&self) -> impl Iterator<Item = &str> {
        self.flags.iter().map(|(key, _)| key.as_str())
    }

    /// These spellings with `over`'s laid over them: a key `over` sets
    /// (`over_keys`, as written) takes `over`'s spelling.
    pub fn overlaid_with(self, over: Durations<O>, over_keys: &[String]) -> Durations<O> {
        let overridden = |millis_key: &String| {
            over_keys.contains(millis_key)
                || short_of::<O>(millis_key).is_some_and(|short| over_keys.contains(&short))
        };
        let mut spelled: BTreeSet<String> = self
            .spelled
            .into_iter()
            .filter(|key| !overridden(key))
            .collect();
        spelled.extend(over.spelled);
        Durations {
            flags: over.flags,
            spelled,
            options: PhantomData,
        }
    }
}

fn both(short: &str, millis_key: &str) -> String {
    format!("set {short} or {millis_key}, not both")
}

/// Sets `-millis` key `millis_key` of `options` to `millis`, given in the
/// duration spelling `short`; refused when this source already set it.
fn set<O: ConfigOptions>(
    options: &mut O,
    (short, millis_key): (&str, &str),
    millis: u64,
) -> Result<(), Invalid> {
    let Some(value) = options.millis_mut(millis_key) else {
        return Err((short.to_string(), "not a duration key".to_string()));
    };
    if value.is_some() {
        return Err((short.to_string(), both(short, millis_key)));
    }
    *value = Some(millis);
    options
        .durations_mut()
        .spelled
        .insert(millis_key.to_string());
    Ok(())
}

/// Moves the duration flags of `options` into their `-millis` keys. A key
/// given in both spellings is an error naming both (clap refuses that
/// already; this catches options built in code).
pub fn fold<O: ConfigOptions>(mut options: O) -> Result<O, Invalid> {
    for (key, millis) in std::mem::take(&mut options.durations_mut().flags) {
        let millis_key = millis_key_of::<O>(&key).unwrap_or_default();
        set(&mut options, (&key, &millis_key), millis)?;
    }
    Ok(options)
}

impl<O> Default for Durations<O> {
    fn default() -> Self {
        Durations {
            flags: Vec::new(),
            spelled: BTreeSet::new(),
            options: PhantomData,
        }
    }
}

impl<O> Clone for Durations<O> {
    fn clone(&self) -> Self {
        Durations {
            flags: self.flags.clone(),
            spelled: self.spelled.clone(),
            options: PhantomData,
        }
    }
}

impl<O> fmt::Debug for Durations<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Durations")
            .field("flags", &self.flags)
            .field("spelled", &self.spelled)
            .finish()
    }
}

/// The duration flags: one per `-millis` key, with that key's help, shown
/// where the (hidden) `-millis` flag would be, and in conflict with it.
impl<O: ConfigOptions> clap::Args for Durations<O> {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        let docs = O::reference();
        for (key, millis_key) in O::duration_keys() {
            let Some(millis_arg) = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(millis_key.as_str()))
                .map(|a| (a.get_id().clone(), a.get_display_order()))
            else {
                continue;
            };
            // One paragraph without its final period, as clap shows a doc comment.
            let help = docs
                .iter()
                .find(|k| k.key == key)
                .map(|k| k.doc.trim_end_matches('.').to_string())
                .unwrap_or_default();
            cmd = cmd.arg(
                clap::Arg::new(key.clone())
                    .long(key)
                    .value_name("DURATION")
                    .value_parser(parse)
                    .help(help)
                    .display_order(millis_arg.1)
                    .conflicts_with(millis_arg.0),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl<O: ConfigOptions> clap::FromArgMatches for Durations<O> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut durations = Durations::default();
        durations.update_from_arg_matches(matches)?;
        Ok(durations)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for (key, _) in O::duration_keys() {
            let given = matches
                .try_get_one::<u64>(&key)
                .map_err(|e| clap::Error::raw(clap::error::ErrorKind::InvalidValue, e))?;
            if let Some(&millis) = given {
                self.flags.retain(|(k, _)| *k != key);
                self.flags.push((key, millis));
            }
        }
        Ok(())
    }
}

/// Reads one source's options from a TOML table: each declared key into
/// its field, each duration key into its `-millis` key. An unknown key, a
/// bad duration and a key set in both spellings are errors raised where
/// the parser stands on that key or value, so they carry its position.
pub fn deserialize_options<'de, O: ConfigOptions, D: Deserializer<'de>>(
    d: D,
) -> Result<O, D::Error> {
    d.deserialize_map(OptionsVisitor(PhantomData))
}

struct OptionsVisitor<O>(PhantomData<fn() -> O>);

impl<'de, O: ConfigOptions> Visitor<'de> for OptionsVisitor<O> {
    type Value = O;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of configuration keys")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<O, A::Error> {
        let mut options = O::default();
        while let Some(key) = map.next_key_seed(KeySeed::<O>(PhantomData))? {
            match key {
                Key::Declared(key) if options.durations().spelled.contains(&key) => {
                    let short = short_of::<O>(&key).unwrap_or_default();
                    return refuse(&mut map, both(&short, &key));
                }
                Key::Declared(key) => {
                    if !options.read_value(&key, &mut map)? {
                        return Err(de::Error::unknown_field(&key, &[]));
                    }
                }
                Key::Duration { key, millis_key } => {
                    if options.millis_mut(&millis_key).is_some_and(|v| v.is_some()) {
                        return refuse(&mut map, both(&key, &millis_key));
                    }
                    let DurationValue(millis) = map.next_value()?;
                    set(&mut options, (&key, &millis_key), millis)
                        .map_err(|(_, reason)| de::Error::custom(reason))?;
                }
            }
        }
        Ok(options)
    }
}

/// A key of a config file, as the options know it.
enum Key {
    Declared(String),
    /// A `-millis` key written without the suffix.
    Duration {
        key: String,
        millis_key: String,
    },
}

/// Reads a key and refuses one the options do not know.
struct KeySeed<O>(PhantomData<fn() -> O>);

impl<'de, O: ConfigOptions> DeserializeSeed<'de> for KeySeed<O> {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de, O: ConfigOptions> Visitor<'de> for KeySeed<O> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a configuration key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        if O::declared_keys().iter().any(|k| k == key) {
            return Ok(Key::Declared(key.to_string()));
        }
        match O::duration_keys()
            .into_iter()
            .find(|(short, _)| short == key)
        {
            Some((key, millis_key)) => Ok(Key::Duration { key, millis_key }),
            None => Err(E::unknown_field(key, &[])),
        }
    }
}

/// Refuses the value `map` stands on with `reason`: an error raised while
/// reading a value carries that value's position.
fn refuse<'de, A: MapAccess<'de>, T>(map: &mut A, reason: String) -> Result<T, A::Error> {
    map.next_value_seed(Refuse(reason.clone()))?;
    Err(de::Error::custom(reason))
}

struct Refuse(String);

impl<'de> DeserializeSeed<'de> for Refuse {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<(), D::Error> {
        Err(de::Error::custom(self.0))
    }
}

/// A duration in a file: a string such as `"30s"`.
struct DurationValue(u64);

impl<'de> serde::Deserialize<'de> for DurationValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurationVisitor)
    }
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = DurationValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a duration in quotes ({SYNTAX})")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<DurationValue, E> {
        parse(text).map(DurationValue).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<DurationValue, E> {
        Err(E::custom(unquoted(number)))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<DurationValue, E> {
        Err(E::custom(unquoted(number)))
    }
}
