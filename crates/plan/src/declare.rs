//! The macro that turns the one row per workload key (in `options/mod.rs`) into everything a key
//! needs: its field in [`WorkloadKeys`](crate::WorkloadKeys) (the partial struct of plan files,
//! `[defaults]` and flags), its field in [`Workload`](crate::Workload) (the resolved struct),
//! its row in the options table (flag, help, built-in default), layering (`over`), the names of
//! set keys, its check as resolution runs it, and the way back from a resolved value to keys
//! (what an agent checks a step request with). Before it, a key was written in five places
//! (`pause_s` touched 13 files).
//!
//! A row reads
//!
//! ```text
//! /// Doc of the key (on both fields).
//! key: PartialType [extra serde attributes of the partial field]
//!     => field: ResolvedType [attributes of the resolved field] = [HOW],
//!     table(flag, FlagKind, "VALUE", default, "help");
//! ```
//!
//! where HOW is `value` (the key's value as it is, `value CHECK` with a check
//! `fn(&T) -> Result<(), String>`), `optional CHECK` (an `Option` that stays one), `list CHECK`
//! (a list, empty when not given) or `custom RESOLVE, BACK` (a resolved value made of one or more
//! keys: `RESOLVE(&WorkloadKeys) -> Result<T, KeyError>` and `BACK(&T, &mut WorkloadKeys)`).
//! A key without `=> …` has no field of its own: a custom row resolves it with others (the data
//! keys into `data`, `frontend_blocks` into `working_set`).

/// An error about one key: its name and what is wrong, located by the resolver.
pub type KeyError = (&'static str, String);

/// Ok when `ok`, else the message: the body of a row's check.
pub fn ensure(ok: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(message()) }
}

macro_rules! workload_keys {
    ($(
        $(#[doc = $doc:literal])*
        $key:ident : $P:ty $([$($pattr:tt)*])*
            $(=> $field:ident : $R:ty $([$($rattr:tt)*])* = $how:tt)?,
            table($flag:expr, $kind:expr, $value:literal, $default:expr, $help:expr $(,)?);
    )*) => {
        /// Every key a workload (or `[defaults]`, or the command line) can set: the plan file's
        /// partial form, layered command line over workload over `[defaults]` over the built-in
        /// defaults.
        #[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct WorkloadKeys {
            $(
                $(#[doc = $doc])*
                #[serde(skip_serializing_if = "Option::is_none")]
                $(#[$($pattr)*])*
                pub $key: Option<$P>,
            )*
        }

        resolved_struct! {
            @fields []
            $({ [$(#[doc = $doc])*] $([$field: $R [$(#[$($rattr)*])*]])? })*
        }

        /// Every workload key, in the order of the rows.
        pub const WORKLOAD_OPTIONS: &[WorkloadOption] = &[
            $(WorkloadOption {
                key: stringify!($key),
                flag: $flag,
                kind: $kind,
                value_name: $value,
                help: $help,
                default: $default,
            },)*
        ];

        impl WorkloadKeys {
            pub fn is_empty(&self) -> bool {
                *self == WorkloadKeys::default()
            }

            /// Keys set in `self` win; the others come from `lower`.
            pub fn over(&self, lower: &WorkloadKeys) -> WorkloadKeys {
                WorkloadKeys { $($key: self.$key.clone().or_else(|| lower.$key.clone()),)* }
            }

            /// Every key, as spelled in TOML, in the order of the rows.
            pub fn all_keys() -> Vec<&'static str> {
                vec![$(stringify!($key)),*]
            }

            /// Names of the keys that are set, as they are spelled in TOML.
            pub fn set_keys(&self) -> Vec<&'static str> {
                let mut v = Vec::new();
                $(if self.$key.is_some() {
                    v.push(stringify!($key));
                })*
                v
            }

            /// The resolved workload of keys that are layered down to the built-in defaults:
            /// each row's check, in the order of the rows (the rules between keys are
            /// `resolve::workload::cross_checks`).
            pub(crate) fn resolve_each(&self) -> Result<Workload, $crate::declare::KeyError> {
                $($(let $field: $R = key_how!(resolve self, $key, $P, $how)?;)?)*
                Ok(Workload { $($($field,)?)* })
            }
        }

        impl Workload {
            /// Every key back from its row (`Workload::keys` leaves out what another key
            /// stands for).
            pub(crate) fn each_key(&self) -> WorkloadKeys {
                let mut k = WorkloadKeys::default();
                $($(key_how!(back self, k, $key, $field, $how);)?)*
                k
            }
        }
    };
}

/// The resolved struct, a field per row that has one, with the row's doc and attributes: rows
/// are walked one by one (a doc cannot be repeated inside a row's optional part).
macro_rules! resolved_struct {
    (@fields [$($fields:tt)*]) => {
        /// A workload resolved: every value present and checked, ready for the engine.
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub struct Workload {
            $($fields)*
        }
    };
    (@fields [$($fields:tt)*] { [$($doc:tt)*] [$field:ident: $R:ty [$($attr:tt)*]] } $($rows:tt)*) => {
        resolved_struct! { @fields [$($fields)* $($doc)* $($attr)* pub $field: $R,] $($rows)* }
    };
    (@fields [$($fields:tt)*] { [$($doc:tt)*] } $($rows:tt)*) => {
        resolved_struct! { @fields [$($fields)*] $($rows)* }
    };
}

/// One row's resolution (`resolve`) and way back (`back`), by its HOW.
macro_rules! key_how {
    (resolve $k:ident, $key:ident, $P:ty, [value]) => {
        $k.$key.clone().ok_or_else(|| $crate::declare::missing(stringify!($key)))
    };
    (resolve $k:ident, $key:ident, $P:ty, [value $check:expr]) => {{
        let check: fn(&$P) -> Result<(), String> = $check;
        match &$k.$key {
            Some(v) => check(v).map(|()| v.clone()).map_err(|m| (stringify!($key), m)),
            None => Err($crate::declare::missing(stringify!($key))),
        }
    }};
    (resolve $k:ident, $key:ident, $P:ty, [optional $check:expr]) => {{
        let check: fn(&$P) -> Result<(), String> = $check;
        match &$k.$key {
            Some(v) => check(v).map(|()| Some(v.clone())).map_err(|m| (stringify!($key), m)),
            None => Ok(None),
        }
    }};
    (resolve $k:ident, $key:ident, $P:ty, [list $check:expr]) => {{
        let check: fn(&$P) -> Result<(), String> = $check;
        match &$k.$key {
            Some(v) => check(v).map(|()| v.clone()).map_err(|m| (stringify!($key), m)),
            None => Ok(Vec::new()),
        }
    }};
    (resolve $k:ident, $key:ident, $P:ty, [custom $resolve:path, $back:path]) => {
        $resolve($k)
    };
    (back $w:ident, $k:ident, $key:ident, $field:ident, [value $($check:expr)?]) => {
        $k.$key = Some($w.$field.clone())
    };
    (back $w:ident, $k:ident, $key:ident, $field:ident, [optional $check:expr]) => {
        $k.$key = $w.$field.clone()
    };
    (back $w:ident, $k:ident, $key:ident, $field:ident, [list $check:expr]) => {
        $k.$key = (!$w.$field.is_empty()).then(|| $w.$field.clone())
    };
    (back $w:ident, $k:ident, $key:ident, $field:ident, [custom $resolve:path, $back:path]) => {
        $back(&$w.$field, &mut $k)
    };
}

/// A key with a built-in default that has no value: only a `WorkloadKeys` not layered over the
/// defaults gets here.
pub fn missing(key: &'static str) -> KeyError {
    (key, format!("{key} has no value: it has no built-in default, so the plan must set it"))
}
