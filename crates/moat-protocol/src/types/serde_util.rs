//! Serde helpers shared by the type modules: compact number output and constant string tags.

use serde::Serializer;

/// The largest integer an `f64` holds exactly (2^53).
const EXACT_INT_LIMIT: f64 = 9_007_199_254_740_992.0;

/// Serialize an `f64`, writing integral values as JSON integers (`50`, not `50.0`), so a value
/// read from `50` is written back as `50`.
pub(crate) fn f64_compact<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    let v = *v;
    if v.is_finite() && v.fract() == 0.0 && v.abs() < EXACT_INT_LIMIT {
        if v >= 0.0 {
            s.serialize_u64(v as u64)
        } else {
            s.serialize_i64(v as i64)
        }
    } else {
        s.serialize_f64(v)
    }
}

/// [`f64_compact`] for optional fields (only called for `Some`, with `skip_serializing_if`).
pub(crate) fn opt_f64_compact<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => f64_compact(v, s),
        None => s.serialize_none(),
    }
}

/// Defines a zero-sized type that serializes as one constant string and only deserializes from
/// that string: the `"type": "string"` / `"mode": "url"` discriminators of schema objects.
macro_rules! string_tag {
    ($(#[$m:meta])* $name:ident = $value:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl $name {
            /// The constant string this tag stands for.
            pub const VALUE: &'static str = $value;
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($value)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct TagVisitor;
                impl ::serde::de::Visitor<'_> for TagVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("the string \"", $value, "\""))
                    }
                    fn visit_str<E: ::serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        if v == $value {
                            Ok($name)
                        } else {
                            Err(E::invalid_value(::serde::de::Unexpected::Str(v), &self))
                        }
                    }
                }
                d.deserialize_str(TagVisitor)
            }
        }
    };
}

pub(crate) use string_tag;
