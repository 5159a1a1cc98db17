//! The static keys, region and endpoint of an AWS shared-config profile (`~/.aws/credentials`
//! and `~/.aws/config`), which pyarrow and the AWS CLI read and object_store's `from_env`
//! does not, so that one environment works for advcalc and for Ray Data alike.
//!
//! Only what the environment lacks is taken from the profile (the environment always wins),
//! and only static keys: a profile whose credentials come from SSO, a `credential_process` or
//! an assumed role is refused when `AWS_PROFILE` names it, and passed over otherwise (then
//! object_store's own chain follows: web identity, ECS, EKS, instance metadata).

use std::collections::HashMap;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// What the profile adds to the environment; `None` where the environment has its own.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FromProfile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
}

/// Keys that say a profile's credentials come from something other than static keys.
const OTHER_SOURCES: [&str; 7] = [
    "credential_process",
    "role_arn",
    "sso_session",
    "sso_start_url",
    "sso_account_id",
    "web_identity_token_file",
    "login_session",
];

/// What the profile `AWS_PROFILE` (default `default`) adds to the variables `env` gives.
pub fn from_profile(env: &dyn Fn(&str) -> Option<String>) -> Result<FromProfile> {
    let set = |k: &str| env(k).is_some_and(|v| !v.is_empty());
    let need_keys = !set("AWS_ACCESS_KEY_ID");
    let need_region = !set("AWS_REGION") && !set("AWS_DEFAULT_REGION");
    let need_endpoint =
        !set("AWS_ENDPOINT_URL_S3") && !set("AWS_ENDPOINT_URL") && !set("AWS_ENDPOINT");
    if !(need_keys || need_region || need_endpoint) {
        return Ok(FromProfile::default());
    }
    let explicit = env("AWS_PROFILE").filter(|p| !p.is_empty());
    let name = explicit.clone().unwrap_or_else(|| "default".into());
    let home = env("HOME")
        .or_else(|| env("USERPROFILE"))
        .unwrap_or_default();
    let path = |var: &str, file: &str| {
        env(var)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(&home).join(".aws").join(file))
    };
    let credentials = section(&path("AWS_SHARED_CREDENTIALS_FILE", "credentials"), &name)?;
    let config = match section(
        &path("AWS_CONFIG_FILE", "config"),
        &format!("profile {name}"),
    )? {
        None if name == "default" => section(&path("AWS_CONFIG_FILE", "config"), "default")?,
        found => found,
    };
    if credentials.is_none() && config.is_none() {
        return match explicit {
            Some(p) => Err(Error::usage(format!(
                "AWS_PROFILE={p}: no such profile in the AWS credentials or config file"
            ))
            .with_hint("unset AWS_PROFILE, or add the profile (aws configure --profile NAME)")),
            None => Ok(FromProfile::default()),
        };
    }
    let (credentials, config) = (credentials.unwrap_or_default(), config.unwrap_or_default());
    // the credentials file wins over the config file for keys, as in the AWS CLI
    let get = |k: &str| credentials.get(k).or_else(|| config.get(k)).cloned();
    let mut out = FromProfile::default();
    if need_keys {
        if let Some(other) = OTHER_SOURCES.iter().find(|k| get(k).is_some()) {
            if explicit.is_some() {
                return Err(Error::usage(format!(
                    "AWS profile {name}: its credentials come from `{other}`, which advcalc \
                     cannot use (it reads only a profile's static keys)"
                ))
                .with_hint(format!(
                    "export them first: eval \"$(aws configure export-credentials --profile \
                     {name} --format env)\""
                )));
            }
        } else if let (Some(id), Some(secret)) =
            (get("aws_access_key_id"), get("aws_secret_access_key"))
        {
            out.access_key_id = Some(id);
            out.secret_access_key = Some(secret);
            out.session_token = get("aws_session_token");
        }
    }
    if need_region {
        out.region = config.get("region").cloned();
    }
    if need_endpoint {
        out.endpoint_url = config.get("endpoint_url").cloned();
    }
    Ok(out)
}

/// The `key = value` pairs of section `[name]` of the INI file at `path` (several sections
/// of that name are merged); `None` if the file or the section does not exist. Indented
/// lines (the config file's nested `s3 =` settings) and comments are skipped.
fn section(path: &std::path::Path, name: &str) -> Result<Option<HashMap<String, String>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::usage(format!(
                "{}: cannot read the AWS profile file",
                path.display()
            ))
            .with_source(e));
        }
    };
    let mut found: Option<HashMap<String, String>> = None;
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with(['#', ';']) || line.starts_with([' ', '\t']) {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            inside = header.split_whitespace().collect::<Vec<_>>().join(" ") == name;
            if inside {
                found.get_or_insert_with(HashMap::new);
            }
        } else if inside && let Some((key, value)) = trimmed.split_once('=') {
            let values = found.get_or_insert_with(HashMap::new);
            values.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Home {
        dir: tempfile::TempDir,
        vars: HashMap<String, String>,
    }

    /// A temporary HOME with these `~/.aws/credentials` and `~/.aws/config`, and `vars`.
    fn home(credentials: &str, config: &str, vars: &[(&str, &str)]) -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".aws")).unwrap();
        std::fs::write(dir.path().join(".aws/credentials"), credentials).unwrap();
        std::fs::write(dir.path().join(".aws/config"), config).unwrap();
        let mut vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        vars.insert("HOME".into(), dir.path().to_str().unwrap().into());
        Home { dir, vars }
    }

    impl Home {
        fn resolve(&self) -> Result<FromProfile> {
            from_profile(&|k| self.vars.get(k).cloned())
        }
    }

    const CREDENTIALS: &str = "[default]\naws_access_key_id = AKIDEFAULT\n\
        aws_secret_access_key = secret-default\n\n# a comment\n[work]\n\
        aws_access_key_id=AKIWORK\naws_secret_access_key=secret-work\n\
        aws_session_token = token-work\n";
    const CONFIG: &str = "[default]\nregion = eu-west-1\ns3 =\n  max_concurrent_requests = 4\n\
        [profile work]\nregion = eu-central-1\nendpoint_url = http://127.0.0.1:9000\n\
        [profile sso]\nsso_session = corp\nregion = us-west-2\n\
        [profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n";

    #[test]
    fn the_default_profile_gives_keys_and_region() {
        let got = home(CREDENTIALS, CONFIG, &[]).resolve().unwrap();
        assert_eq!(got.access_key_id.as_deref(), Some("AKIDEFAULT"));
        assert_eq!(got.secret_access_key.as_deref(), Some("secret-default"));
        assert_eq!(got.session_token, None);
        assert_eq!(got.region.as_deref(), Some("eu-west-1"));
        assert_eq!(got.endpoint_url, None);
    }

    #[test]
    fn aws_profile_names_the_profile_and_the_environment_wins() {
        let h = home(CREDENTIALS, CONFIG, &[("AWS_PROFILE", "work")]);
        let got = h.resolve().unwrap();
        assert_eq!(got.access_key_id.as_deref(), Some("AKIWORK"));
        assert_eq!(got.secret_access_key.as_deref(), Some("secret-work"));
        assert_eq!(got.session_token.as_deref(), Some("token-work"));
        assert_eq!(got.region.as_deref(), Some("eu-central-1"));
        assert_eq!(got.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));

        let h = home(
            CREDENTIALS,
            CONFIG,
            &[
                ("AWS_PROFILE", "work"),
                ("AWS_ACCESS_KEY_ID", "AKIENV"),
                ("AWS_DEFAULT_REGION", "ap-south-1"),
                ("AWS_ENDPOINT_URL", "http://other"),
            ],
        );
        assert_eq!(h.resolve().unwrap(), FromProfile::default());
    }

    #[test]
    fn files_named_by_the_environment_and_keys_in_the_config_file() {
        let h = home("", "", &[]);
        let dir = h.dir.path();
        std::fs::write(
            dir.join("cfg"),
            "[profile x]\naws_access_key_id = AKICFG\naws_secret_access_key = s\nregion = r1\n",
        )
        .unwrap();
        let mut h = home("", "", &[("AWS_PROFILE", "x")]);
        h.vars.insert(
            "AWS_CONFIG_FILE".into(),
            dir.join("cfg").to_str().unwrap().into(),
        );
        let got = h.resolve().unwrap();
        assert_eq!(got.access_key_id.as_deref(), Some("AKICFG"));
        assert_eq!(got.region.as_deref(), Some("r1"));
    }

    #[test]
    fn what_advcalc_cannot_do_is_refused_only_when_asked_for() {
        for profile in ["sso", "role"] {
            let h = home(CREDENTIALS, CONFIG, &[("AWS_PROFILE", profile)]);
            let e = h.resolve().unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(profile), "{e}");
            assert!(e.to_string().contains("static keys"), "{e}");
            assert!(
                e.hint()
                    .unwrap()
                    .contains("aws configure export-credentials")
            );
        }
        // the default profile using SSO: passed over (object_store's chain follows), its
        // region still read
        let h = home(
            "",
            "[default]\nsso_session = corp\nregion = us-west-2\n",
            &[],
        );
        let got = h.resolve().unwrap();
        assert_eq!(got.access_key_id, None);
        assert_eq!(got.region.as_deref(), Some("us-west-2"));
        // a profile asked for that does not exist
        let e = home(CREDENTIALS, CONFIG, &[("AWS_PROFILE", "nope")])
            .resolve()
            .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("AWS_PROFILE=nope"), "{e}");
    }

    #[test]
    fn no_files_no_profile() {
        let dir = tempfile::tempdir().unwrap();
        let vars: HashMap<String, String> =
            [("HOME".to_string(), dir.path().to_str().unwrap().to_string())].into();
        assert_eq!(
            from_profile(&|k| vars.get(k).cloned()).unwrap(),
            FromProfile::default()
        );
    }
}
