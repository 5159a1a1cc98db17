//! Who may read: the view serves rollouts on shared training nodes, so every request must
//! carry the random token printed in the URL (`?token=`; the page adds it to every request
//! it makes), compared in constant time, and name the view's own address in its `Host`
//! header (a page on another site that rebinds its DNS name to 127.0.0.1 sends its own name
//! there and is refused). No cookie: browsers scope cookies by host, not port, so one would
//! reach every other service on localhost.

use std::net::{IpAddr, SocketAddr};

use crate::error::{Error, Result};

/// The token's length in random bytes (128 bits).
const TOKEN_BYTES: usize = 16;

/// The view's token and the `Host` values it answers to.
pub struct Auth {
    token: String,
    /// Accepted `Host` header values (`None`: any, when bound to every interface, where the
    /// names the machine is reached by are not known; the token still holds).
    hosts: Option<Vec<String>>,
    url_host: String,
}

impl Auth {
    /// A fresh random token.
    pub fn random_token() -> Result<String> {
        let mut raw = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut raw)
            .map_err(|e| Error::usage(format!("no random token for the view: {e}")))?;
        Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The checks of a view listening on `addr` (bound as `host`) with `token`.
    pub fn with_token(addr: SocketAddr, host: IpAddr, token: String) -> Auth {
        let port = addr.port();
        let hosts = if host.is_unspecified() {
            None
        } else {
            let mut h = vec![format!("{}:{port}", bracket(host))];
            if host.is_loopback() {
                h.push(format!("localhost:{port}"));
                h.push(format!("127.0.0.1:{port}"));
                h.push(format!("[::1]:{port}"));
            }
            Some(h)
        };
        let url_host = match host {
            IpAddr::V4(v4) if v4.is_unspecified() => format!("127.0.0.1:{port}"),
            IpAddr::V6(v6) if v6.is_unspecified() => format!("[::1]:{port}"),
            _ => format!("{}:{port}", bracket(host)),
        };
        Auth {
            token,
            hosts,
            url_host,
        }
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// `host:port` for the printed URL.
    pub fn url_host(&self) -> &str {
        &self.url_host
    }

    /// Check `Host`, then the token in the request's target; why not, when refused.
    pub fn check(&self, target: &str, host: &[&str]) -> std::result::Result<(), String> {
        if let Some(allowed) = &self.hosts {
            match host {
                [h] if allowed.iter().any(|a| a.eq_ignore_ascii_case(h)) => {}
                [h] => {
                    return Err(format!(
                        "Host {h:?} is not this view's address (open the URL advcalc view printed)"
                    ));
                }
                _ => return Err("one Host header is required".into()),
            }
        }
        let query = target.split_once('?').map_or("", |(_, q)| q);
        let query = query.split('#').next().unwrap_or("");
        let given = query
            .split('&')
            .filter_map(|kv| kv.strip_prefix("token="))
            .any(|t| same(t.as_bytes(), self.token.as_bytes()));
        if given {
            Ok(())
        } else {
            Err(
                "a missing or wrong token (open the URL advcalc view printed, with its ?token=)"
                    .into(),
            )
        }
    }
}

fn bracket(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

/// Equal, in time that depends on the lengths only (never on where they differ).
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(host: &str) -> Auth {
        let host: IpAddr = host.parse().unwrap();
        Auth::with_token(SocketAddr::new(host, 8123), host, "ab12".into())
    }

    #[test]
    fn the_token_in_the_query_is_needed_every_time() {
        let a = auth("127.0.0.1");
        let host = ["127.0.0.1:8123"];
        assert!(a.check("/?token=ab12", &host).is_ok());
        assert!(a.check("/api/rows/3?x=1&token=ab12", &host).is_ok());
        for bad in [
            "/",
            "/?token=ab13",
            "/?token=ab1",
            "/?xtoken=ab12",
            "/?token=AB12",
        ] {
            assert!(a.check(bad, &host).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_host_that_is_not_the_view_s_address_is_refused_even_with_the_token() {
        let a = auth("127.0.0.1");
        for h in ["evil.example:8123", "127.0.0.1:9999", "localhost"] {
            assert!(a.check("/?token=ab12", &[h]).is_err(), "{h}");
        }
        assert!(a.check("/?token=ab12", &[]).is_err());
        assert!(
            a.check("/?token=ab12", &["127.0.0.1:8123", "evil:8123"])
                .is_err()
        );
        assert!(a.check("/?token=ab12", &["LOCALHOST:8123"]).is_ok());
    }

    #[test]
    fn bound_to_every_interface_any_host_is_accepted_but_the_token_is_still_needed() {
        let a = auth("0.0.0.0");
        assert!(a.check("/?token=ab12", &["node17:8123"]).is_ok());
        assert!(a.check("/", &["node17:8123"]).is_err());
        assert_eq!(a.url_host(), "127.0.0.1:8123");
        assert_eq!(auth("::").url_host(), "[::1]:8123");
    }

    #[test]
    fn comparison_needs_equal_lengths_and_bytes() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }
}
