# The A2Pack test suite: every capability through the Julia layer, against the
# real peers the Python suite uses (the upstream fixture, packs and bags made
# by the `a2pack` CLI, steps.npy read as plain bytes), unhappy paths too.
#
# Environment: A2PACK_LIBRARY (the library; see A2Pack's docstring),
# A2PACK_CLI (else `a2pack` beside the library; a missing CLI is an error),
# A2PACK_FIXTURE (else the fixture's default place beside the repository, as
# the Makefile's FIXTURE).

using Test
using A2Pack
import A2Pack: A2PackError, LibA2Pack

const REPO = normpath(joinpath(@__DIR__, "..", "..", "..", ".."))
const FIXTURE = get(ENV, "A2PACK_FIXTURE", joinpath(dirname(REPO), "shared", "fixtures", "example.a2run2"))
const CLI = get(ENV, "A2PACK_CLI", joinpath(dirname(A2Pack.library_path()), "a2pack"))
isfile(FIXTURE) || error("upstream fixture missing: $FIXTURE (set A2PACK_FIXTURE)")
isfile(CLI) || error("no a2pack CLI at $CLI: build it and set A2PACK_CLI")

cli(args...) = run(`$CLI -q $(collect(string.(args)))`)
cli_out(args...) = read(`$CLI $(collect(string.(args)))`, String)

"The status an A2PackError carries, or `nothing` when `f` does not throw one."
function status_of(f)
    try
        f()
    catch e
        e isa A2PackError && return e
        rethrow()
    end
    nothing
end

# Runs made by the CLI: `n` greedy games (they store branch values) of at most
# `steps` moves, files sorted as the pack orders them.
function cli_runs(dir; n=6, steps=40, seed=7)
    cli("gen", "-n", n, "-o", dir, "--seed", seed, "--policy", "greedy", "--max-steps", steps)
    sort(filter(f -> endswith(f, ".a2run2"), readdir(dir; join=true)))
end

# steps.npy rows as a 32 × N byte matrix, read without the library (NPY 1.0/2.0).
function npy_rows(path)
    raw = read(path)
    raw[1:6] == UInt8[0x93, codeunits("NUMPY")...] || error("$path is not an NPY file")
    hlen, start = raw[7] == 1 ? (Int(raw[9]) | Int(raw[10]) << 8, 11) :
        (Int(reinterpret(UInt32, raw[9:12])[1]), 13)
    header = String(raw[start:start+hlen-1])
    n = parse(Int, match(r"'shape': \((\d+),", header)[1])
    data = raw[start+hlen:end]
    reshape(data[1:32n], 32, n)
end

@testset "A2Pack" begin

@testset "core" begin
    @test occursin(r"^\d+\.\d+\.\d+$", A2Pack.version())
    @test occursin(r"^\d+\.\d+\.\d+$", A2Pack.zstd_version())
    @test occursin(r"^\d+\.\d+\.\d+$", A2Pack.lz4_version())
    @test isabspath(A2Pack.library_path())
    @test A2Pack.abi_version() == LibA2Pack.A2PACK_ABI_VERSION
    @test unsafe_string(LibA2Pack.a2pack_status_name(LibA2Pack.A2PACK_E_CORRUPT)) == "A2PACK_E_CORRUPT"
    e = A2PackError(LibA2Pack.A2PACK_E_IO, "boom")
    @test e.name == "A2PACK_E_IO" && e isa Exception
    @test occursin("A2PACK_E_IO", sprint(showerror, e)) && occursin("boom", sprint(showerror, e))
end

@testset "board" begin
    b = 0x100100010232001B
    @test highest_tile(b) == 2048
    @test highest_tile(0) == 0
    @test board_score(0x0000000000000022) == 8   # two 4-tiles: (2-1)*4 each
    mask = legal_moves(b)
    for m in 0:3
        @test (apply_move(b, m) != b) == (mask >> m & 1 == 1)
    end
    @test apply_move(b, 7) == b
    out = branches_normalise([1.0, 2.0, 3.0, 4.0], 0b0101)
    # Illegal moves get 0; the legal ones are scaled so that the best is 1.
    @test out[2] == 0 && out[4] == 0 && isapprox(out[3], 1; atol=1e-5) && 0 <= out[1] < out[3]
    @test_throws ArgumentError branches_normalise([1.0], 1)
end

@testset "run: the upstream fixture" begin
    bytes = read(FIXTURE)
    @test detect_kind(bytes) === :v2
    r = decode_run(bytes)
    m = meta(r)
    @test (m.steps, m.start_unix_s, m.max_score, m.highest_tile) == (959, 1755927754, 20504, 2048)
    @test isapprox(m.elapsed_s, 15.2595; atol=1e-3)
    @test m.engine === nothing
    @test length(r) == 959 && eltype(r) == Step
    @test [count(==(k), moves(r)) for k in 0:3] == [78, 337, 253, 291]
    @test r[1].pre_board == 0x0010000000000001
    @test r[end].pre_board == boards(r)[end]
    @test final_board(r) == 0x100100010232001B
    @test has_branches(r) && all(s.branches !== nothing for s in r)
    @test source_kind(r) === :v2
    @test r[1:3] == [r[1], r[2], r[3]]
    @test r[[5, 2]] == [r[5], r[2]]
    @test count(_ -> true, r) == 959
    @test_throws BoundsError r[0]
    @test_throws BoundsError r[960]
    @test occursin("959 steps", sprint(show, r))
    @test encode(r) == bytes                      # byte-exact v2
    mktempdir() do d
        p = joinpath(d, "again.a2run2")
        save(r, p)
        @test read(p) == bytes
        open(Run, p) do again
            @test encode(again) == bytes
        end
    end
    # v1 cannot store branches unless told to drop them.
    e = status_of(() -> encode(r; kind=:v1))
    @test e !== nothing && e.status == LibA2Pack.A2PACK_E_INVALID_ARGUMENT
    v1 = encode(r; kind=:v1, drop_branches=true)
    @test v1[1:4] == codeunits("A2T1") && detect_kind(v1) === :v1
    back = decode_run(v1)
    @test source_kind(back) === :v1 && !has_branches(back)
    @test boards(back) == boards(r)
    @test decode_run(upgrade_v1(v1)) |> encode == encode(back)
    close(r)
    @test !isopen(r)
    close(r)                                      # idempotent
    e = status_of(() -> length(r))
    @test e !== nothing && e.status == LibA2Pack.A2PACK_E_CLOSED
end

@testset "run: built from arrays" begin
    n = 5
    bds = UInt64[1, 2, 3, 4, 5] .<< 4
    mvs = UInt8[0, 1, 2, 3, 0]
    vals = Float32.(reshape(1:4n, 4, n)) ./ 10
    r = Run(A2Pack.RunMeta(n, 1_700_000_000, 1.25, 42, 16, "julia"), bds, mvs;
            values=vals, legal_masks=fill(0x0f, n), branch_present=UInt8[1, 1, 0, 1, 1],
            final_board=0x99)
    @test meta(r).engine == "julia" && meta(r).max_score == 42
    @test boards(r) == bds && moves(r) == mvs
    @test r[3].branches === nothing
    @test r[2].branches == Tuple(vals[:, 2])
    @test final_board(r) == 0x99
    @test decode_run(encode(r)) |> encode == encode(r)
    @test_throws DimensionMismatch Run(A2Pack.RunMeta(1, 0, 0, 0, 0, nothing), UInt64[1, 2], UInt8[0])
end

@testset "run: bad input" begin
    e = status_of(() -> load_run("/nonexistent/missing.a2run2"))
    @test e !== nothing && e.status == LibA2Pack.A2PACK_E_NOT_FOUND
    @test occursin("missing.a2run2", e.message)
    bytes = read(FIXTURE)
    e = status_of(() -> decode_run(bytes[1:100]))
    @test e !== nothing && e.status < 0 && !isempty(e.message)
    @test_throws ArgumentError load_run("a\0b")
end

@testset "run batch from files" begin
    b = RunBatch([FIXTURE, FIXTURE]; workers=2)
    @test columns(b).step_offsets == UInt64[0, 959, 1918]
    @test payload_bytes(b) == 2 * filesize(FIXTURE)
    e = try RunBatch([FIXTURE, "/nonexistent/x.a2run2"]); nothing catch err; err end
    @test e isa A2PackError && occursin("/nonexistent/x.a2run2", e.message)
end

@testset "run batch: column views keep the batch alive" begin
    bytes = read(FIXTURE)
    b = RunBatch([bytes, bytes, bytes])
    cols = columns(b)
    b = nothing
    GC.gc(); GC.gc()
    @test cols.boards[1] == 0x0010000000000001   # memory still valid
    @test cols.step_offsets == UInt64[0, 959, 1918, 2877]
    @test size(cols.branch_values) == (4, 2877)
    @test cols.source_kind == UInt8[2, 2, 2]
    @test cols.boards isa AbstractVector{UInt64} && length(cols.boards) == 2877
    close(cols.boards.owner)
    e = status_of(() -> cols.boards[1])
    @test e !== nothing && e.status == LibA2Pack.A2PACK_E_CLOSED
end

@testset "gen" begin
    a = gen_run(11; policy=:random, max_steps=30)
    b = gen_run(11; policy=:random, max_steps=30)
    @test encode(a) == encode(b) && length(a) <= 30
    mktempdir() do d
        gen_dir(d, 3; seed=5, policy=:random, max_steps=10)
        @test length(filter(f -> endswith(f, ".a2run2"), readdir(d))) == 3
    end
    @test_throws ArgumentError gen_run(1; policy=:nope)
end

@testset "pack: built by the CLI" begin
    mktempdir() do d
        files = cli_runs(joinpath(d, "runs"))
        path = joinpath(d, "p.a2pack")
        cli("pack", "--input", joinpath(d, "runs"), "--output", path)
        open(Pack, path) do p
            @test length(p) == length(files) && eltype(p) == Run
            @test occursin("$(length(files)) runs", sprint(show, p))
            for (i, f) in enumerate(files)
                raw = read(f)
                @test read_bytes(p, i) == raw
                @test slice(p, i) == raw              # stored uncompressed: a view of the bytes
                @test entry(p, i).raw_length == length(raw)
                @test encode(p[i]) == raw
            end
            @test [encode(x) for x in p[2:3]] == [read(files[2]), read(files[3])]
            @test count(_ -> true, p) == length(files)
            @test_throws BoundsError p[0]
            @test_throws BoundsError p[length(files) + 1]
            s = stats(p)
            @test s.count == length(files) && s.min_len <= s.p50 <= s.max_len
            validate(p; full=true)
            @test permutation(p) == 1:length(files)
            perm = permutation(p; shuffle=true, seed=3)
            @test sort(perm) == 1:length(files) && perm == permutation(p; shuffle=true, seed=3)
            seen = Int[]
            for (batch, ids) in batches(p; batch_size=4, shuffle=true, seed=3)
                cols = columns(batch)
                @test length(cols.final_boards) == length(ids)
                @test cols.final_boards[1] == final_board(p[ids[1]])
                append!(seen, ids)
            end
            @test seen == perm
            out = joinpath(d, "runs.jsonl")
            @test to_jsonl(p, out) == filesize(out)
            @test countlines(out) == length(files)
            view1 = slice(p, 1)
            close(p)
            e = status_of(() -> view1[1])
            @test e !== nothing && e.status == LibA2Pack.A2PACK_E_CLOSED
        end
        # The same runs packed from Julia, compressed; the CLI validates it.
        zpath = joinpath(d, "z.a2pack")
        s = pack_dir(joinpath(d, "runs"), zpath; compression=:zstd)
        @test s.entries == length(files)
        cli("validate", "--packfile", zpath, "--full")
        # lz4 entries read back as the same bytes.
        lpath = joinpath(d, "l.a2pack")
        s = pack_dir(joinpath(d, "runs"), lpath; compression=:lz4, lz4_level=9)
        @test s.entries == length(files)
        cli("validate", "--packfile", lpath, "--full")
        open(Pack, lpath) do lp
            @test entry(lp, 1).compression === :lz4 && entry(lp, 1).compressed
            @test all(read_bytes(lp, i) == read(f) for (i, f) in enumerate(files))
        end
        wpath = joinpath(d, "w.a2pack")
        open(PackWriter, wpath) do w
            add!(w, files[1])
            add!(w, read(files[2]))
            @test length(w) == 2
        end
        @test Pack(wpath) |> length == 2
        # A writer whose block throws leaves nothing.
        bad = joinpath(d, "never.a2pack")
        @test_throws ErrorException open(PackWriter, bad) do w
            add!(w, files[1]); error("stop")
        end
        @test !isfile(bad)
        e = status_of(() -> open(PackWriter, joinpath(d, "x.a2pack")) do w
            add!(w, UInt8[1, 2, 3])
        end)
        @test e !== nothing && e.status < 0
        # Damage: a flipped payload byte fails the CRC check, naming the entry.
        raw = read(path)
        off = Int(open(p -> entry(p, 2).offset, Pack, path))
        raw[off + 10] ⊻= 0xff                     # 1-based: stored byte 9 of entry 2
        broken = joinpath(d, "broken.a2pack")
        write(broken, raw)
        e = status_of(() -> open(p -> validate(p; full=true), Pack, broken))
        @test e !== nothing && e.status == LibA2Pack.A2PACK_E_CHECKSUM
        @test occursin("entry 1", e.message) && occursin("broken.a2pack", e.message)
        e = status_of(() -> open(p -> read_bytes(p, 2), Pack, broken))
        @test e !== nothing && e.status == LibA2Pack.A2PACK_E_CHECKSUM
        @test open(p -> read_bytes(p, 1), Pack, broken) == read(files[1])   # the rest still reads
        e = status_of(() -> Pack(joinpath(d, "runs")))
        @test e !== nothing && e.status < 0
    end
end

@testset "bag: cross-read with the CLI" begin
    mktempdir() do d
        recs = [Vector{UInt8}(codeunits("record $i " * "x"^i)) for i in 0:49]
        path = joinpath(d, "j.bagz")
        open(BagWriter, path) do w
            for r in recs
                write(w, r)
            end
            @test length(w) == 50
        end
        # Read back by the CLI: one line per record, index TAB hex.
        lines = split(chomp(cli_out("bag", "cat", "--hex", path)), '\n')
        @test length(lines) == 50
        @test [hex2bytes(split(l, '\t')[2]) for l in lines] == recs
        # Written by the CLI, read by Julia.
        inputs = [joinpath(d, "in$i.bin") for i in 1:5]
        for (i, f) in enumerate(inputs)
            write(f, rand(UInt8, 100i))
        end
        cpath = joinpath(d, "c.bag")
        cli("bag", "write", cpath, inputs...)
        open(BagReader, cpath) do r
            @test length(r) == 5 && eltype(r) == Vector{UInt8}
            @test [r[i] for i in 1:5] == read.(inputs)
            @test r[2:4] == read.(inputs[2:4])
            @test r[[5, 1, 5]] == read.(inputs[[5, 1, 5]])
            @test collect(r) == read.(inputs)
            @test_throws BoundsError r[6]
            b = read_batch(r, [3, 1])
            views = records(b)
            b = nothing
            GC.gc()
            @test views[1] == read(inputs[3]) && views[2] == read(inputs[1])
        end
        open(BagReader, path) do r
            @test collect(r) == recs
            @test occursin("50 records", sprint(show, r))
        end
        # A writer whose block throws leaves nothing under its name.
        gone = joinpath(d, "gone.bagz")
        @test_throws ErrorException open(BagWriter, gone) do w
            write(w, "a"); error("stop")
        end
        @test !isfile(gone)
        e = status_of(() -> BagReader(joinpath(d, "missing.bagz")))
        @test e !== nothing && e.status < 0 && occursin("missing.bagz", e.message)
        write(joinpath(d, "junk.bag"), rand(UInt8, 5))
        e = status_of(() -> collect(BagReader(joinpath(d, "junk.bag"))))
        @test e !== nothing && e.status < 0
    end
end

@testset "dataset: gather equals steps.npy" begin
    mktempdir() do d
        cli_runs(joinpath(d, "runs"); n=5, steps=60, seed=3)
        res = build_dataset(joinpath(d, "runs"), joinpath(d, "ds"); workers=2)
        @test res.total_runs == 5
        # Appends extend steps.npy in place unless asked to copy it.
        cli_runs(joinpath(d, "more"); n=2, steps=30, seed=4)
        app = build_dataset(joinpath(d, "more"), joinpath(d, "ds"); append=true)
        @test app.total_runs == 7 && !app.steps_copied
        # The same runs again: refused unless duplicates are allowed.
        e = status_of(() -> build_dataset(joinpath(d, "more"), joinpath(d, "ds"); append=true))
        @test e !== nothing && e.status == LibA2Pack.A2PACK_E_INVALID_ARGUMENT
        app = build_dataset(joinpath(d, "more"), joinpath(d, "ds"); append=true, copy_steps=true,
                            allow_duplicates=true)
        @test app.total_runs == 9 && app.steps_copied && app.runs_duplicated == 2
        res = app
        raw = npy_rows(joinpath(d, "ds", "steps.npy"))
        n = size(raw, 2)
        @test res.total_rows == n
        open(Dataset, joinpath(d, "ds")) do ds
            @test length(ds) == n && eltype(ds) == StepRow
            @test rows(ds) == raw
            idx = [n, 1, 7, 7, 2]
            out = Matrix{UInt8}(undef, 32, length(idx))
            @test gather!(out, ds, idx) === out
            @test out == raw[:, idx]
            @test_throws DimensionMismatch gather!(Matrix{UInt8}(undef, 32, 2), ds, idx)
            @test_throws BoundsError gather!(Matrix{UInt8}(undef, 32, 1), ds, [n + 1])
            bds = Vector{UInt64}(undef, length(idx)); mv = Vector{UInt8}(undef, length(idx))
            ev = Matrix{Float32}(undef, 4, length(idx))
            gather_columns!(ds, idx; boards=bds, moves=mv, ev_values=ev)
            for (k, i) in enumerate(idx)
                row = ds[i]
                @test row == StepRow(raw[:, i])
                @test (bds[k], mv[k]) == (row.board, row.move)
                @test Tuple(ev[:, k]) == row.ev_values
            end
            @test ds[[2, 1]] == [ds[2], ds[1]]
            @test count(_ -> true, ds) == n
            all_steps = select_steps(ds, "")
            @test all_steps == 1:n
            some = select_steps(ds, "id = ?", 0)
            @test !isempty(some) && all(ds[i].run_id == 0 for i in some)
            @test select_runs(ds, "id >= ?", 3) == [3, 4]
            e = status_of(() -> select_steps(ds, "no_such_column = 1"))
            @test e !== nothing && e.status == LibA2Pack.A2PACK_E_INVALID_ARGUMENT
            s1 = Sampler(n; seed=9, batch_size=8); s2 = Sampler(n; seed=9, batch_size=8)
            @test collect(s1) == collect(s2)
            @test sort(reduce(vcat, collect(s1))) == 1:n
            set_epoch!(s1, 1)
            @test collect(s1) != collect(s2) || n <= 1
            view_rows = rows(ds)
            close(ds)
            e = status_of(() -> view_rows[1])
            @test e !== nothing && e.status == LibA2Pack.A2PACK_E_CLOSED
        end
        e = status_of(() -> build_dataset(joinpath(d, "runs"), joinpath(d, "ds")))
        @test e !== nothing && e.status < 0        # exists, no overwrite
        e = status_of(() -> Dataset(joinpath(d, "runs")))
        @test e !== nothing && e.status < 0 && !isempty(e.message)
    end
end

@testset "logger: round trip" begin
    mktempdir() do d
        dir = joinpath(d, "log")
        expected = []
        open(Logger, dir; frame_bytes=8192) do lg
            a = register_stream(lg, "{\"entity\": \"e1\"}"; epoch_scale=0.5, value_scale=0.25)
            b = register_stream(lg, "{\"entity\": \"e2\"}"; epoch_scale=1.0, value_scale=1.0, sort=true)
            for i in 1:200
                idx = UInt32.(sort(unique(rand(0:1000, 1 + i % 7))))
                vals = Float64.(rand(-40:40, length(idx))) ./ 4
                record(lg, a, i / 2, idx, vals)
                push!(expected, (a, i / 2, idx, vals))
            end
            record(lg, b, 3.0, UInt32[5, 1], [1.0, 2.0])     # sorted by the stream's flag
            push!(expected, (b, 3.0, UInt32[1, 5], [2.0, 1.0]))
            flush(lg)
            # Bad input is refused and nothing of it is written.
            e = status_of(() -> record(lg, a, 1.0, UInt32[3, 2], [1.0, 1.0]))
            @test e !== nothing && e.status == LibA2Pack.A2PACK_E_INVALID_ARGUMENT
            e = status_of(() -> record(lg, 999, 1.0, UInt32[1], [1.0]))
            @test e !== nothing && e.status < 0
            @test_throws DimensionMismatch record(lg, a, 1.0, UInt32[1, 2], [1.0])
        end
        data = decode_log(dir)
        @test length(data) == length(expected)
        @test isempty(problems(data))
        @test log_summary(data).streams == 2
        got = [(r.stream_id, r.epoch, r.indices, r.values) for r in data]
        @test sort(got; by=x -> (x[1], x[2])) == sort(expected; by=x -> (x[1], x[2]))
        cols = columns(data)
        @test length(cols.offsets) == length(expected) + 1
        @test eltype(cols.values) == Float64 && eltype(cols.indices) == UInt32
        close(data)
        # A closed logger refuses work; close is idempotent.
        lg = Logger(joinpath(d, "log2"))
        close(lg); close(lg)
        e = status_of(() -> record(lg, 0, 1.0, UInt32[1], [1.0]))
        @test e !== nothing && e.status == LibA2Pack.A2PACK_E_CLOSED
        e = status_of(() -> decode_log(joinpath(d, "nowhere"); strict=true))
        @test e !== nothing && e.status < 0
    end
end

end # @testset "A2Pack"
