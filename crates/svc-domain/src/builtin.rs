//! The built-in agent library: catalog agents shipped with the binary, runnable by any workspace
//! under their `svc-` handles (a workspace agent of the same name wins). Kept as data
//! (`builtin_agents.toml`), parsed once, and validated by a test with the same rules a start uses.

use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

/// One built-in agent.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BuiltinAgent {
    /// Handle, starting with `svc-`.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its configuration: an inline agent block without `type`.
    pub config: Value,
}

#[derive(Deserialize)]
struct Library {
    agent: Vec<BuiltinAgent>,
}

/// Every built-in agent.
pub fn builtin_agents() -> &'static [BuiltinAgent] {
    static LIBRARY: OnceLock<Vec<BuiltinAgent>> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        // The file is part of the binary; the test below proves it parses, so a failure here
        // can only be a build that skipped the tests. An empty library is the safe answer then.
        toml::from_str::<Library>(include_str!("../builtin_agents.toml"))
            .map(|library| library.agent)
            .unwrap_or_default()
    })
}

/// The built-in agent named `name`.
pub fn builtin_agent(name: &str) -> Option<&'static BuiltinAgent> {
    name.starts_with("svc-").then(|| builtin_agents().iter().find(|agent| agent.name == name)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Issues;
    use crate::session_config::parse_inline_agent;

    #[test]
    fn every_builtin_agent_loads_with_the_inline_rules() {
        let agents = builtin_agents();
        assert!(agents.len() >= 4, "the library parsed");
        for agent in agents {
            assert!(agent.name.starts_with("svc-") && crate::requests::is_agent_handle(&agent.name), "{}", agent.name);
            let (mut issues, mut problems, mut too_long) = (Issues::default(), Vec::new(), false);
            let parsed =
                parse_inline_agent(&agent.config, &Vec::new(), false, &mut issues, &mut problems, &mut too_long);
            assert!(
                parsed.is_some() && issues.is_empty() && problems.is_empty() && !too_long,
                "{}: {issues:?} {problems:?}",
                agent.name
            );
        }
        assert!(builtin_agent("svc-receptionist").is_some());
        assert!(builtin_agent("receptionist").is_none());
    }
}
