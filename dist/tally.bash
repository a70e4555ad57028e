# bash completion for tally(1): commands, their options, and values tally can
# name (pools and lease ids come from the daemon when it answers).
_tally() {
  local cur prev words cword
  _init_completion || return

  local commands="run daemon attach seats metrics top leases lease logs pools events doctor gpu ledger config"
  local cmd="" i
  for ((i = 1; i < cword; i++)); do
    case "${words[i]}" in
      --) return ;;  # the workload's own arguments
      -*) ;;
      *) cmd="${words[i]}"; break ;;
    esac
  done

  case "$prev" in
    --config|--metrics-textfile|--state-dir|--socket|--svg|--cgroup-parent|--proc-root|--sys-root|--cgroup-root|--plugstack|--plugin-dir)
      _filedir; return ;;
    --unit)
      COMPREPLY=($(compgen -W "$(systemctl list-units --type=service,scope --state=running --no-legend --plain 2>/dev/null | awk '{print $1}')" -- "$cur"))
      return ;;
    --pid)
      _pids; return ;;
    --container)
      COMPREPLY=($(compgen -W "$( (podman ps --format '{{.Names}}' || docker ps --format '{{.Names}}') 2>/dev/null)" -- "$cur"))
      return ;;
    --engine) COMPREPLY=($(compgen -W "podman docker" -- "$cur")); return ;;
    --pool)
      COMPREPLY=($(compgen -W "$(tally pools --json 2>/dev/null | sed -n 's/.*"pool": "\([^"]*\)".*/\1/p')" -- "$cur"))
      return ;;
    --by) COMPREPLY=($(compgen -W "process cgroup container" -- "$cur")); return ;;
    --outcome) COMPREPLY=($(compgen -W "exited killed-by-signal oom-killed killed-by-tally stopped exec-failed containment-refused ended released lost withdrawn unknown" -- "$cur")); return ;;
    --kind) COMPREPLY=($(compgen -W "queued granted started adopted readopted released outcome lost withdrawn gpu-memory-high gpu-memory-high-cleared gpu-memory-kill gpu-memory-max-exceeded refused coverage" -- "$cur")); return ;;
    --gpu-memory-action) COMPREPLY=($(compgen -W "refuse kill report" -- "$cur")); return ;;
    --oom-policy) COMPREPLY=($(compgen -W "kill stop continue" -- "$cur")); return ;;
    --memory-max|--memory-high|--memory-swap-max|--gpu-memory-max|--gpu-memory-high|--probe-size)
      COMPREPLY=($(compgen -W "512M 1G 4G 16G 32G 48G 64G" -- "$cur")); return ;;
    --interval|--sample-interval|--queue-timeout|--timeout|--reconnect-timeout)
      COMPREPLY=($(compgen -W "250ms 500ms 1s 2s 5s 30s" -- "$cur")); return ;;
    --attr|--name|--priority|--count|--lines|--gpu-over-samples|--metrics-listen|--probe-cgroup|--limit|--last|--since|--until|--lease|--parent|--cgroup|--slice)
      return ;;
  esac

  local opts=""
  case "$cmd" in
    "") opts="$commands --help --version"; COMPREPLY=($(compgen -W "$opts" -- "$cur")); return ;;
    run) opts="--name --attr --memory-max --memory-high --memory-swap-max --oom-policy --gpu-memory-max --gpu-memory-high
               --gpu-memory-action --gpu-over-samples --sample-interval --slice --user --system --cgroupfs --cgroup-parent
               --state-dir --json --quiet --socket --pool --priority --queue-timeout --detach --reconnect-timeout --help" ;;
    daemon) opts="--config --metrics-textfile --metrics-listen --help" ;;
    attach) opts="--unit --container --engine --cgroup --pid --pool --parent --memory-max --gpu-memory-max --gpu-memory-high --gpu-memory-action
                  --gpu-over-samples --name --attr --priority --wait --queue-timeout --force --json --socket --timeout --help" ;;
    seats|leases|pools) opts="--json --socket --timeout --help" ;;
    metrics) opts="--socket --timeout --help" ;;
    top) opts="--interval --once --socket --help" ;;
    events) opts="--count --timeout --since --until --lease --pool --kind --utc --json --socket --help" ;;
    logs) opts="--follow --lines --socket --timeout --help" ;;
    doctor) opts="--json --active --probe-size --probe-cgroup --slurm --plugstack --plugin-dir --help" ;;
    gpu) opts="--json --by --cgroup --help" ;;
    lease)
      if [[ $cword -eq $((i + 1)) ]]; then
        COMPREPLY=($(compgen -W "show release" -- "$cur")); return
      fi
      if [[ "$cur" != -* ]]; then
        COMPREPLY=($(compgen -W "$(tally leases --json 2>/dev/null | sed -n 's/.*"lease": "\([0-9a-f]\{12\}\)".*/\1/p')" -- "$cur"))
        return
      fi
      opts="--json --socket --timeout --state-dir --svg --help" ;;
    ledger)
      if [[ $cword -eq $((i + 1)) && "$cur" != -* ]]; then COMPREPLY=($(compgen -W "verify export" -- "$cur")); return; fi
      opts="--json --last --since --until --name --outcome --lease --utc --state-dir --config --help" ;;
    config)
      if [[ $cword -eq $((i + 1)) ]]; then COMPREPLY=($(compgen -W "check" -- "$cur")); return; fi
      if [[ "$cur" != -* ]]; then _filedir toml; return; fi
      opts="--json --help" ;;
  esac
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -F _tally tally
