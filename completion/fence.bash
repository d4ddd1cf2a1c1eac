# bash completion for fence(1)                             -*- shell-script -*-
# Installed as $(BASHCOMPDIR)/fence (share/bash-completion/completions/fence).
# Completes subcommands, options and the values that have a fixed set or are
# files; lease names are left alone.  Needs nothing from bash-completion.

_fence()
{
    local cur prev cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=""
    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}
    COMPREPLY=()

    # The subcommand: the first word after "fence".
    cmd=""
    [ "${#COMP_WORDS[@]}" -gt 1 ] && [ "$COMP_CWORD" -gt 1 ] && cmd=${COMP_WORDS[1]}
    if [ "$COMP_CWORD" -le 1 ]; then
        COMPREPLY=($(compgen -W "run status token help --help --version" -- "$cur"))
        return 0
    fi

    # After "--" (fence run ... -- COMMAND): complete the command and its files.
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [ "${COMP_WORDS[i]}" = "--" ]; then
            if [ "$i" -eq $((COMP_CWORD - 1)) ]; then
                COMPREPLY=($(compgen -c -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return 0
        fi
    done

    local conn="--url --redis --tls --cacert --cacertdir --cert --key --sni --insecure
                --password-file --sentinel-password-file"
    # Options whose value is a file, a folder, or from a fixed list.
    case "$prev" in
        --cacert|--cert|--key|--password-file|--sentinel-password-file|--metrics-file)
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0 ;;
        --cacertdir)
            COMPREPLY=($(compgen -d -- "$cur"))
            return 0 ;;
        --token-mode)
            COMPREPLY=($(compgen -W "clock dense" -- "$cur"))
            return 0 ;;
        --url|--redis)
            COMPREPLY=($(compgen -W "redis:// rediss:// unix:// redis-sentinel://" -- "$cur"))
            return 0 ;;
        --ttl|--wait|-w|--max-hold|--kill-after|--replica-timeout|--min-replicas|--raise|--sni|-E|--conflict-exit-code)
            return 0 ;;
    esac

    case "$cmd" in
        run)
            [[ "$cur" == -* ]] && COMPREPLY=($(compgen -W "$conn --ttl --wait -w --max-hold --kill-after
                --metrics-file --allow-eviction --min-replicas --replica-timeout --token-mode
                -q --quiet -E --conflict-exit-code -h --help --" -- "$cur")) ;;
        status)
            [[ "$cur" == -* ]] && COMPREPLY=($(compgen -W "$conn --json -h --help" -- "$cur")) ;;
        token)
            [[ "$cur" == -* ]] && COMPREPLY=($(compgen -W "$conn --raise -h --help" -- "$cur")) ;;
        help)
            [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "run status token" -- "$cur")) ;;
    esac
    return 0
}
complete -F _fence fence
