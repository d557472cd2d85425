# Generating runs with the library's own engine.

function _gen_options(; policy::Symbol=:expectimax, depth::Integer=2, format::Symbol=:v2,
                      jobs::Integer=0, start_unix_s::Integer=0, max_steps::Integer=0)
    pol = policy === :expectimax ? L.A2PACK_POLICY_EXPECTIMAX : policy === :greedy ?
        L.A2PACK_POLICY_GREEDY : policy === :random ? L.A2PACK_POLICY_RANDOM :
        throw(ArgumentError("policy must be :expectimax, :greedy or :random"))
    kv = Pair{Symbol,Any}[:policy => pol, :depth => depth, :format => _kind_value(format),
                          :jobs => jobs, :max_steps => max_steps]
    start_unix_s == 0 || push!(kv, :start_unix_s => start_unix_s)
    _options(L.a2pack_gen_options, L.a2pack_gen_options_init, kv...)
end

"Play one game (same seed and options, same run)."
gen_run(seed::Integer; kw...) = _new_run(out -> L.a2pack_gen_run(_gen_options(; kw...), UInt64(seed), out))

"Play `n_runs` games into `dir`/run-NNNNNN.a2run2."
gen_dir(dir::AbstractString, n_runs::Integer; seed::Integer=0, kw...) =
    check(L.a2pack_gen_dir(_gen_options(; kw...), _cstr(dir), n_runs, seed, C_NULL, C_NULL))
