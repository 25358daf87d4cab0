#!/usr/bin/env bash
# What `#[agent_tool]` costs at compile time, per tool, against hand-written
# serde + schemars (and rmcp's `#[tool]`) measured in the same run.
#
# Usage: ./scripts/compile-cost.sh [N]          (N defaults to 100)
#
# It generates a scratch cargo workspace (default target/compile-cost; set
# COMPILE_COST_DIR to move it) whose crates depend on this checkout by path,
# with N tools and with 1 tool of each kind:
#   aptix   one `#[agent_tool]` fn per tool, the hello-world shape (arguments
#           struct, output struct, a body that reads the context), and the
#           `tools()` list a tool crate exports, which compiles their code;
#   serde   the same structs deriving Deserialize, Serialize and JsonSchema,
#           the same body as a plain fn, and per tool what a hand-written
#           tool needs from them: parse the arguments with serde_json, call,
#           serialize the result, generate the schema;
#   rmcp    the same tools as methods of one `#[tool_router]` impl
#           (`Parameters<Args>` -> `Json<Output>`), as rmcp's docs write them.
# Dependencies are built once; then each crate is built in release after
# touching its source, COMPILE_COST_REPEAT times (default 3), keeping the
# fastest. It prints t[1], t[N] and (t[N] - t[1]) / (N - 1) per tool for
# each kind, in wall-clock time and in CPU time (user + system of cargo and
# the compilers; steadier when the machine is shared), and aptix's per-tool
# cost as a ratio of the others'.
#
# Environment: COMPILE_COST_APTIX, the aptix checkout the crates depend on
# (default: this one; point it at a copy to measure while this tree is being
# edited); CARGO_TARGET_DIR is honoured (default: the scratch dir's own
# target/, so the workspace's build is not touched); COMPILE_COST_KINDS
# (default "aptix serde rmcp"); COMPILE_COST_TIMINGS=1 adds `--timings` to the
# N-tool builds (reports under the target dir's cargo-timings/).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(cd "${COMPILE_COST_APTIX:-$PWD}" && pwd)"

N="${1:-100}"
if ! [[ "$N" =~ ^[0-9]+$ ]] || [ "$N" -lt 2 ]; then
  echo "usage: $0 [N >= 2]" >&2
  exit 2
fi
DIR="${COMPILE_COST_DIR:-$PWD/target/compile-cost}"
REPEAT="${COMPILE_COST_REPEAT:-3}"
KINDS="${COMPILE_COST_KINDS:-aptix serde rmcp}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$DIR/target}"

version_of() {
  # The version this checkout locks, so the scratch crates build the same code.
  awk -v name="$1" '
    $0 == "name = \"" name "\"" { found = 1; next }
    found && /^version = / { gsub(/"/, "", $3); print $3; exit }
  ' "$ROOT/Cargo.lock"
}
SERDE="$(version_of serde)"
SERDE_JSON="$(version_of serde_json)"
SCHEMARS="$(version_of schemars)"
RMCP="$(version_of rmcp)"

# The body every kind shares: the hello-world tool's.
greet_body() {
  local i="$1" conversation="$2" session="$3" wrap="$4" err="$5" open="" close=""
  if [ -n "$wrap" ]; then open="$wrap(" close=")"; fi
  cat <<EOF
    let name = args.name.trim();
    if name.is_empty() {
        return Err($err);
    }
    Ok(${open}Greeting$i {
        message: format!("Hello, {name}! Welcome. ($i)"),
        conversation_id: $conversation,
        session_id: $session,
    }$close)
EOF
}

structs() {
  local i="$1"
  cat <<EOF

/// Arguments of tool $i.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct HelloArgs$i {
    /// The name of the person to greet.
    pub name: String,
}

/// The greeting of tool $i.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Greeting$i {
    /// The greeting to show the user.
    pub message: String,
    /// The conversation the greeting was made in.
    pub conversation_id: Option<String>,
    /// The session the greeting was made in.
    pub session_id: Option<String>,
}
EOF
}

gen_aptix() {
  local n="$1"
  echo '#![allow(missing_docs, dead_code)]'
  echo 'use aptix::prelude::*;'
  for ((i = 0; i < n; i++)); do
    structs "$i"
    cat <<EOF

/// Creates a friendly greeting using the user's name.
#[agent_tool(
    name = "hello_world_$i",
    usage = "Call when the user asks to be greeted or welcomed.",
    executor = server,
    approval = auto,
)]
pub async fn hello_world_$i(args: HelloArgs$i, ctx: &ToolContext) -> Result<Greeting$i, ToolError> {
EOF
    greet_body "$i" 'ctx.conversation_id().map(str::to_owned)' \
      'ctx.session_id().map(str::to_owned)' '' \
      'ToolError::invalid_arguments("`name` is empty: pass the name of the person to greet.")'
    echo '}'
  done
  # The list a tool crate exports (see the README). It is what builds the
  # tools' code: a generic tool nobody names is never compiled, as rmcp's
  # tools are compiled because its router names them.
  echo
  echo '/// The tools of this crate.'
  echo 'pub fn tools() -> aptix::CatalogBuilder {'
  printf '    aptix::tools!['
  for ((i = 0; i < n; i++)); do printf 'HelloWorld%dTool, ' "$i"; done
  echo ']'
  echo '}'
}

gen_serde() {
  local n="$1"
  echo '#![allow(missing_docs, dead_code)]'
  echo 'use schemars::JsonSchema;'
  echo 'use serde::{Deserialize, Serialize};'
  for ((i = 0; i < n; i++)); do
    structs "$i"
    cat <<EOF

/// Creates a friendly greeting using the user's name.
pub async fn hello_world_$i(
    args: HelloArgs$i,
    conversation_id: Option<&str>,
    session_id: Option<&str>,
) -> Result<Greeting$i, String> {
EOF
    greet_body "$i" 'conversation_id.map(str::to_owned)' 'session_id.map(str::to_owned)' \
      '' '"`name` is empty: pass the name of the person to greet.".to_owned()'
    cat <<EOF
}

/// Parses the arguments, calls, serializes the result.
pub async fn call_$i(arguments: &str) -> Result<String, String> {
    let args: HelloArgs$i = serde_json::from_str(arguments).map_err(|e| e.to_string())?;
    let greeting = hello_world_$i(args, None, None).await?;
    serde_json::to_string(&greeting).map_err(|e| e.to_string())
}

/// The arguments' and the output's JSON Schemas.
pub fn schemas_$i() -> (serde_json::Value, serde_json::Value) {
    (
        schemars::schema_for!(HelloArgs$i).to_value(),
        schemars::schema_for!(Greeting$i).to_value(),
    )
}
EOF
  done
}

gen_rmcp() {
  local n="$1"
  cat <<'EOF'
#![allow(missing_docs, dead_code)]
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{Json, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
EOF
  for ((i = 0; i < n; i++)); do structs "$i"; done
  cat <<'EOF'

/// The tools as an rmcp tool router.
#[derive(Debug, Clone)]
pub struct Tools {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Tools {
    pub fn new() -> Self {
        Tools { tool_router: Self::tool_router() }
    }
EOF
  for ((i = 0; i < n; i++)); do
    cat <<EOF

    /// Creates a friendly greeting using the user's name.
    #[tool(
        name = "hello_world_$i",
        description = "Creates a friendly greeting using the user's name.\n\nUsage: Call when the user asks to be greeted or welcomed."
    )]
    async fn hello_world_$i(&self, Parameters(args): Parameters<HelloArgs$i>) -> Result<Json<Greeting$i>, String> {
EOF
    greet_body "$i" None None Json '"`name` is empty: pass the name of the person to greet.".to_owned()'
    echo '    }'
  done
  cat <<'EOF'
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}
EOF
}

manifest() {
  local crate="$1" kind="$2"
  cat <<EOF
[package]
name = "$crate"
version = "0.0.0"
edition = "2024"
publish = false

[lib]
path = "src/lib.rs"

[dependencies]
serde = { version = "=$SERDE", features = ["derive"] }
serde_json = "=$SERDE_JSON"
schemars = "=$SCHEMARS"
EOF
  case "$kind" in
    # Without default features: a crate that only declares tools needs no store.
    aptix) echo "aptix = { path = \"$ROOT\", default-features = false }" ;;
    rmcp) echo "rmcp = { version = \"=$RMCP\", default-features = false, features = [\"server\", \"macros\"] }" ;;
  esac
}

mkdir -p "$DIR"
members=()
for kind in $KINDS; do
  case "$kind" in aptix | serde | rmcp) ;; *) echo "unknown kind: $kind" >&2; exit 2 ;; esac
  for n in 1 "$N"; do
    crate="cc-$kind-$n"
    members+=("\"$crate\"")
    mkdir -p "$DIR/$crate/src"
    manifest "$crate" "$kind" >"$DIR/$crate/Cargo.toml.new"
    "gen_$kind" "$n" >"$DIR/$crate/src/lib.rs.new"
    # Rewritten only when changed, so a second run starts warm.
    for f in Cargo.toml src/lib.rs; do
      if cmp -s "$DIR/$crate/$f.new" "$DIR/$crate/$f"; then
        rm "$DIR/$crate/$f.new"
      else
        mv "$DIR/$crate/$f.new" "$DIR/$crate/$f"
      fi
    done
  done
done
{
  echo "# Generated by scripts/compile-cost.sh; its own workspace, outside aptix's."
  echo "[workspace]"
  echo "members = [$(IFS=,; echo "${members[*]}")]"
  echo 'resolver = "3"'
} >"$DIR/Cargo.toml"
# The checkout's lock file: the same dependency versions, no new resolution.
[ -f "$DIR/Cargo.lock" ] || cp "$ROOT/Cargo.lock" "$DIR/Cargo.lock"

cd "$DIR"
echo "== dependencies (built once; not measured)" >&2
cargo build --release --quiet --workspace

# The fastest of REPEAT release builds of one crate after touching its
# source, as "wall_ms cpu_ms": wall clock, and the CPU time (user + system)
# of cargo and the compilers it ran. The CPU time is the steadier figure
# while other work shares the machine.
measure() {
  local crate="$1" extra="${2:-}" best_wall="" best_cpu="" times wall user sys cpu
  # Built once untimed first: `-p` alone unifies dependency features
  # differently from the `--workspace` build above, so the first build of a
  # crate may compile dependencies again.
  cargo build --release --quiet -p "$crate"
  times="$(mktemp)"
  for ((r = 0; r < REPEAT; r++)); do
    touch "$crate/src/lib.rs"
    # shellcheck disable=SC2086
    if ! { TIMEFORMAT='%R %U %S'; time cargo build --release --quiet -p "$crate" $extra 2>&3; } 3>&2 2>"$times"; then
      rm -f "$times"
      return 1
    fi
    read -r wall user sys <"$times"
    wall=$(awk -v t="$wall" 'BEGIN { printf "%d", t * 1000 }')
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%d", (u + s) * 1000 }')
    if [ -z "$best_wall" ] || [ "$wall" -lt "$best_wall" ]; then best_wall="$wall"; fi
    if [ -z "$best_cpu" ] || [ "$cpu" -lt "$best_cpu" ]; then best_cpu="$cpu"; fi
  done
  rm -f "$times"
  echo "$best_wall $best_cpu"
}

# Hundredths of a millisecond per tool, printed with two decimals.
per_tool() { echo $((($2 - $1) * 100 / (N - 1))); }
two_decimals() { printf '%d.%02d' $(($1 / 100)) $(($1 % 100)); }

declare -A PER_TOOL PER_TOOL_CPU
printf '%-6s %10s %10s %14s %12s %12s %14s\n' kind "t[1] ms" "t[$N] ms" "ms per tool" "cpu[1] ms" "cpu[$N] ms" "cpu ms per tool"
for kind in $KINDS; do
  read -r t1 c1 <<<"$(measure "cc-$kind-1")"
  timings=""
  [ "${COMPILE_COST_TIMINGS:-0}" = 1 ] && timings="--timings"
  read -r tn cn <<<"$(measure "cc-$kind-$N" "$timings")"
  PER_TOOL[$kind]="$(per_tool "$t1" "$tn")"
  PER_TOOL_CPU[$kind]="$(per_tool "$c1" "$cn")"
  printf '%-6s %10s %10s %14s %12s %12s %14s\n' "$kind" "$t1" "$tn" "$(two_decimals "${PER_TOOL[$kind]}")" \
    "$c1" "$cn" "$(two_decimals "${PER_TOOL_CPU[$kind]}")"
done
if [ -n "${PER_TOOL[aptix]:-}" ]; then
  for kind in $KINDS; do
    [ "$kind" = aptix ] && continue
    base="${PER_TOOL[$kind]}"
    base_cpu="${PER_TOOL_CPU[$kind]}"
    if [ "$base" -gt 0 ] && [ "$base_cpu" -gt 0 ]; then
      printf 'aptix / %s per tool: %sx wall clock, %sx CPU time\n' "$kind" \
        "$(two_decimals $((PER_TOOL[aptix] * 100 / base)))" \
        "$(two_decimals $((PER_TOOL_CPU[aptix] * 100 / base_cpu)))"
    fi
  done
fi
