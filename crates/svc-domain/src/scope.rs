//! Credential scopes: the spec's table as a closed enum with stable wire strings.
//!
//! Invariant: a [`ScopeSet`] is always *expanded*: if it holds the deprecated umbrella
//! [`Scope::RealtimeUse`] it also holds every scope that umbrella implies, so a check is a plain
//! membership test and `verify` lists exactly what the set holds.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One scope a credential may carry. The wire string is part of the public contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Session start, prepare-room, usage read of a run.
    RealtimeStart,
    /// Outbound phone dial (API keys only).
    RealtimeDial,
    /// Session history, recordings, usage, provider capabilities, default project.
    RealtimeRead,
    /// Session timeline.
    RealtimeLogs,
    /// Session delete.
    RealtimeDelete,
    /// Deprecated umbrella implying the five `realtime:*` scopes and `support:write`.
    RealtimeUse,
    /// Support requests.
    SupportWrite,
    /// End-user token mint and revoke.
    UserTokensMint,
    /// Conversations, messages, templates, artifact metadata.
    ChatRead,
    /// Sending messages.
    ChatWrite,
    /// Reading documents.
    DocumentsRead,
    /// Reserved; required by no endpoint.
    DocumentsWrite,
    /// Creating and updating artifacts and documents.
    ArtifactsWrite,
    /// Reading workspace resources.
    ResourcesRead,
    /// Creating and updating workspace resources.
    ResourcesWrite,
    /// Reading connectors and connected apps.
    ConnectorsRead,
    /// Managing connectors and connected apps.
    ConnectorsWrite,
}

impl Scope {
    /// Every scope, in the order of the spec's table.
    pub const ALL: [Scope; 17] = [
        Scope::RealtimeStart,
        Scope::RealtimeDial,
        Scope::RealtimeRead,
        Scope::RealtimeLogs,
        Scope::RealtimeDelete,
        Scope::SupportWrite,
        Scope::RealtimeUse,
        Scope::UserTokensMint,
        Scope::ChatRead,
        Scope::ChatWrite,
        Scope::DocumentsRead,
        Scope::ArtifactsWrite,
        Scope::ResourcesRead,
        Scope::ResourcesWrite,
        Scope::ConnectorsRead,
        Scope::ConnectorsWrite,
        Scope::DocumentsWrite,
    ];

    /// The scopes the deprecated `realtime:use` umbrella implies.
    pub const IMPLIED_BY_REALTIME_USE: [Scope; 6] = [
        Scope::RealtimeStart,
        Scope::RealtimeDial,
        Scope::RealtimeRead,
        Scope::RealtimeLogs,
        Scope::RealtimeDelete,
        Scope::SupportWrite,
    ];

    /// Extra scopes a mint call may add to a minted end-user token (it always carries
    /// `realtime:start`). `resources:read` is deliberately absent: minted tokens never qualify for
    /// svc delegation.
    pub const MINTABLE_EXTRAS: [Scope; 4] =
        [Scope::RealtimeRead, Scope::RealtimeDelete, Scope::ConnectorsRead, Scope::ConnectorsWrite];

    /// The stable wire string, e.g. `realtime:start`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::RealtimeStart => "realtime:start",
            Scope::RealtimeDial => "realtime:dial",
            Scope::RealtimeRead => "realtime:read",
            Scope::RealtimeLogs => "realtime:logs",
            Scope::RealtimeDelete => "realtime:delete",
            Scope::RealtimeUse => "realtime:use",
            Scope::SupportWrite => "support:write",
            Scope::UserTokensMint => "user_tokens:mint",
            Scope::ChatRead => "chat:read",
            Scope::ChatWrite => "chat:write",
            Scope::DocumentsRead => "documents:read",
            Scope::DocumentsWrite => "documents:write",
            Scope::ArtifactsWrite => "artifacts:write",
            Scope::ResourcesRead => "resources:read",
            Scope::ResourcesWrite => "resources:write",
            Scope::ConnectorsRead => "connectors:read",
            Scope::ConnectorsWrite => "connectors:write",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope `{0}`")]
pub struct UnknownScope(pub String);

impl FromStr for Scope {
    type Err = UnknownScope;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == s).ok_or_else(|| UnknownScope(s.to_owned()))
    }
}

/// Why a scope may not be put on a new credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnissuedScope {
    /// The name is no scope.
    #[error("{0}; scopes: {known}", known = Scope::issued_names())]
    Unknown(#[from] UnknownScope),
    /// `realtime:use`: deprecated and no longer issued (spec, Versioning 7 and the scope table).
    #[error(
        "`realtime:use` is deprecated and no longer issued (keys that hold it keep working); \
         name the scopes it stood for instead: {implied}",
        implied = Scope::IMPLIED_BY_REALTIME_USE.map(Scope::as_str).join(", ")
    )]
    Deprecated,
}

impl Scope {
    /// Whether a new credential may carry this scope: all but the deprecated umbrella
    /// `realtime:use`, which keeps working on the keys that hold it but is no longer issued.
    pub const fn is_issued(self) -> bool {
        !matches!(self, Scope::RealtimeUse)
    }

    /// Parses a scope asked for on a new credential.
    pub fn parse_issued(name: &str) -> Result<Scope, UnissuedScope> {
        match name.parse::<Scope>()? {
            scope if scope.is_issued() => Ok(scope),
            _ => Err(UnissuedScope::Deprecated),
        }
    }

    /// The names of the scopes a new credential may carry, comma-separated.
    fn issued_names() -> String {
        Scope::ALL.into_iter().filter(|scope| scope.is_issued()).map(Scope::as_str).collect::<Vec<_>>().join(", ")
    }
}

/// An expanded, ordered set of scopes (see the module invariant).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeSet(BTreeSet<Scope>);

impl ScopeSet {
    /// The set of `scopes`, expanded.
    pub fn new(scopes: impl IntoIterator<Item = Scope>) -> Self {
        let mut set: BTreeSet<Scope> = scopes.into_iter().collect();
        if set.contains(&Scope::RealtimeUse) {
            set.extend(Scope::IMPLIED_BY_REALTIME_USE);
        }
        ScopeSet(set)
    }

    /// Parses a space-separated list as stored; unknown names are an error, never dropped,
    /// because a silently narrowed credential is as confusing as a widened one.
    pub fn parse_list(list: &str) -> Result<Self, UnknownScope> {
        list.split_whitespace().map(Scope::from_str).collect::<Result<Vec<_>, _>>().map(ScopeSet::new)
    }

    /// The space-separated storage form (expanded).
    pub fn to_list(&self) -> String {
        self.wire_strings().join(" ")
    }

    /// Whether the set holds `scope`.
    pub fn contains(&self, scope: Scope) -> bool {
        self.0.contains(&scope)
    }

    /// The scopes of `required` this set lacks, in the order given.
    pub fn missing(&self, required: &[Scope]) -> Vec<Scope> {
        required.iter().copied().filter(|scope| !self.contains(*scope)).collect()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The wire strings, in the enum's (the spec table's) order.
    pub fn wire_strings(&self) -> Vec<&'static str> {
        self.0.iter().map(|scope| scope.as_str()).collect()
    }

    /// Iterates the scopes in order.
    pub fn iter(&self) -> impl Iterator<Item = Scope> + '_ {
        self.0.iter().copied()
    }
}

impl FromIterator<Scope> for ScopeSet {
    fn from_iter<T: IntoIterator<Item = Scope>>(iter: T) -> Self {
        ScopeSet::new(iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_strings_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for scope in Scope::ALL {
            assert!(seen.insert(scope.as_str()), "duplicate {scope}");
            assert_eq!(scope.as_str().parse::<Scope>(), Ok(scope));
        }
        assert_eq!(seen.len(), 17);
        assert!("realtime:everything".parse::<Scope>().is_err());
        assert!("REALTIME:START".parse::<Scope>().is_err());
    }

    #[test]
    fn realtime_use_expands_to_the_five_realtime_scopes_and_support_write() {
        let set = ScopeSet::new([Scope::RealtimeUse]);
        assert_eq!(
            set.wire_strings(),
            vec![
                "realtime:start",
                "realtime:dial",
                "realtime:read",
                "realtime:logs",
                "realtime:delete",
                "realtime:use",
                "support:write",
            ]
        );
        assert!(!set.contains(Scope::UserTokensMint));
    }

    #[test]
    fn realtime_use_is_no_longer_issued_but_names_what_to_ask_for() {
        assert_eq!(Scope::parse_issued("realtime:start"), Ok(Scope::RealtimeStart));
        assert_eq!(Scope::parse_issued("realtime:use"), Err(UnissuedScope::Deprecated));
        let message = UnissuedScope::Deprecated.to_string();
        assert!(message.contains("no longer issued"), "{message}");
        assert!(
            message.ends_with(
                "realtime:start, realtime:dial, realtime:read, realtime:logs, realtime:delete, support:write"
            )
        );
        let unknown = Scope::parse_issued("realtime:everything").expect_err("unknown").to_string();
        assert!(unknown.starts_with("unknown scope `realtime:everything`; scopes: realtime:start,"), "{unknown}");
        assert!(!unknown.contains("realtime:use"), "the deprecated scope is not offered: {unknown}");
        assert_eq!(Scope::ALL.into_iter().filter(|scope| !scope.is_issued()).collect::<Vec<_>>(), [Scope::RealtimeUse]);
    }

    #[test]
    fn missing_lists_only_absent_scopes_in_requested_order() {
        let set = ScopeSet::new([Scope::RealtimeRead]);
        assert_eq!(
            set.missing(&[Scope::RealtimeLogs, Scope::RealtimeRead, Scope::RealtimeDelete]),
            vec![Scope::RealtimeLogs, Scope::RealtimeDelete]
        );
    }

    #[test]
    fn parse_list_rejects_unknown_names() {
        assert_eq!(ScopeSet::parse_list("realtime:start bogus"), Err(UnknownScope("bogus".into())));
        let set = ScopeSet::parse_list("  realtime:start   support:write ").expect("valid list");
        assert_eq!(set.to_list(), "realtime:start support:write");
    }
}
