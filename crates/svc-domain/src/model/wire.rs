//! The closed wire vocabularies of the model module: every enum a `model` value or a catalog file
//! spells as a string, with one spelling each and one way to parse it.

/// Implemented by every closed wire vocabulary of this module.
pub(super) trait WireEnum: Copy + 'static {
    /// Every value, in wire order.
    const VALUES: &'static [Self];
    /// The wire spelling.
    fn wire(self) -> &'static str;
}

/// `'a', 'b' or 'c'`.
pub(super) fn one_of(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|value| format!("'{value}'")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.clone(),
        None => String::new(),
    }
}

/// The trait impls of a closed vocabulary (`WireEnum`, `Display`, serde as the wire spelling),
/// over its inherent `ALL`, `as_str` and `from_wire`. Separate from [`wire_enum!`] because
/// [`super::Provider`] is declared by the provider table, not by that macro.
macro_rules! wire_enum_impls {
    ($name:ident) => {
        impl $crate::model::wire::WireEnum for $name {
            const VALUES: &'static [Self] = $name::ALL;
            fn wire(self) -> &'static str {
                self.as_str()
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <String as ::serde::Deserialize>::deserialize(deserializer)?;
                $name::from_wire(&text).ok_or_else(|| {
                    let values: Vec<&str> = $name::ALL.iter().map(|v| v.as_str()).collect();
                    <D::Error as ::serde::de::Error>::custom(format!(
                        "expected {}",
                        $crate::model::wire::one_of(&values)
                    ))
                })
            }
        }
    };
}
pub(super) use wire_enum_impls;

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in wire order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }

            /// Parses the wire spelling (exact, case-sensitive).
            pub fn from_wire(text: &str) -> Option<Self> {
                match text { $($wire => Some($name::$variant),)+ _ => None }
            }
        }

        wire_enum_impls!($name);
    };
}

wire_enum! {
    /// A turn detector name. Which provider runs which is decided at resolution.
    TurnDetection {
        /// svc's own semantic turn detection (provider_a only).
        SvcVad = "svc_vad",
        /// The provider's silence-based detector.
        ServerVad = "server_vad",
        /// The provider's semantic detector (provider_b only).
        SemanticVad = "semantic_vad",
    }
}

wire_enum! {
    /// provider_b `eagerness` of `semantic_vad`.
    Eagerness {
        /// Waits longest before ending the user's turn.
        Low = "low",
        /// Medium.
        Medium = "medium",
        /// Ends the user's turn soonest.
        High = "high",
        /// Provider default (medium).
        Auto = "auto",
    }
}

wire_enum! {
    /// provider_a `end_of_speech_sensitivity` of `server_vad`.
    EndOfSpeechSensitivity {
        /// Less eager to end the turn.
        Low = "low",
        /// More eager to end the turn.
        High = "high",
    }
}

wire_enum! {
    /// provider_a `thinking_level`; which values a model accepts is in the catalog.
    ThinkingLevel {
        /// Minimal.
        Minimal = "minimal",
        /// Low.
        Low = "low",
        /// Medium.
        Medium = "medium",
        /// High.
        High = "high",
    }
}

wire_enum! {
    /// provider_b_live `reasoning_effort` of the backend Responses model.
    ReasoningEffort {
        /// Minimal.
        Minimal = "minimal",
        /// Low.
        Low = "low",
        /// Medium.
        Medium = "medium",
        /// High.
        High = "high",
    }
}

wire_enum! {
    /// provider_b_live `verbosity` of the backend Responses model.
    Verbosity {
        /// Low.
        Low = "low",
        /// Medium.
        Medium = "medium",
        /// High.
        High = "high",
    }
}

wire_enum! {
    /// provider_b_live `tool_choice` of the backend Responses model.
    ToolChoice {
        /// The model decides.
        Auto = "auto",
        /// The model must call a tool.
        Required = "required",
        /// The model calls no tool.
        None = "none",
    }
}

wire_enum! {
    /// provider_b_live `service_tier` of the backend Responses model.
    ServiceTier {
        /// Auto.
        Auto = "auto",
        /// Default.
        Default = "default",
        /// Flex.
        Flex = "flex",
        /// Priority.
        Priority = "priority",
    }
}

wire_enum! {
    /// provider_b_live `delegation`: who runs the backend the voice model delegates to.
    Delegation {
        /// The provider runs a Responses model (default).
        Responses = "responses",
        /// The end-user client answers with `delegation-append`.
        Client = "client",
        /// svc runs the backend (needs `resources:read`).
        Svc = "svc",
    }
}

wire_enum! {
    /// provider_c `reasoning_effort`.
    ProviderCReasoningEffort {
        /// Reasoning on (default).
        High = "high",
        /// Reasoning off.
        None = "none",
    }
}
