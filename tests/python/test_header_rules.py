"""The header keeps its own rules: a2pack_api() returns every function (each
section's functions are in the api table or in the table of their section),
and each verb has one spelling, the first names of those that had two being
kept as documented aliases."""

import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bindings"))
import header_model as hm  # noqa: E402

HEADER = hm.parse(REPO / "include" / "a2pack.h")

# The old spellings, each with the name every section now uses: both stay.
ALIASES = {
    "a2pack_bag_reader_shard_info": "a2pack_bag_reader_shard_info_get",
    "a2pack_dataset_get_info": "a2pack_dataset_info_get",
    "a2pack_dataset_sampler_state": "a2pack_dataset_sampler_state_save",
    "a2pack_dataset_sampler_load_state": "a2pack_dataset_sampler_state_load",
    "a2pack_dataset_mix_state": "a2pack_dataset_mix_state_save",
    "a2pack_dataset_mix_load_state": "a2pack_dataset_mix_state_load",
    "a2pack_expectimax_stats": "a2pack_expectimax_stats_get",
    "a2pack_expectimax_reset_stats": "a2pack_expectimax_stats_reset",
    "a2pack_feed_batch_get_info": "a2pack_feed_batch_info_get",
    "a2pack_feed_state": "a2pack_feed_state_save",
    "a2pack_feed_load_state": "a2pack_feed_state_load",
    "a2pack_pack_entry_info": "a2pack_pack_entry_info_get",
    "a2pack_shard_stream_get_info": "a2pack_shard_stream_info_get",
    "a2pack_shard_stream_save_state": "a2pack_shard_stream_state_save",
    "a2pack_shard_stream_load_state": "a2pack_shard_stream_state_load",
    "a2pack_shard_stream_get_stats": "a2pack_shard_stream_stats_get",
}


def tabled():
    """Every function name a2pack_api() gives, through the top table and the
    section tables it points to."""
    names = set()

    def walk(struct_name, prefix):
        for f in HEADER.structs[struct_name].fields:
            t = f.type
            if t.kind == "pointer" and t.target.kind == "function":
                # The tables' own spellings: the arrow table leaves out
                # "_arrow" ("pack_export_entries" is a2pack_pack_export_arrow_entries);
                # "_fn" keeps a field apart from a value of the same name.
                field = f.name.removesuffix("_fn")
                if struct_name == "a2pack_arrow_api":
                    field = field.replace("export", "export_arrow", 1)
                names.add(prefix + field)
            elif t.kind == "pointer" and t.target.kind == "name" and t.target.name.endswith("_api"):
                sub = t.target.name.replace("struct ", "")
                walk(sub, "a2pack_" if sub == "a2pack_arrow_api" else sub[:-len("api")])
    walk("a2pack_api_table", "a2pack_")
    return names


def test_the_api_table_holds_every_function():
    missing = sorted(set(HEADER.functions) - tabled() - {"a2pack_api"})
    assert not missing, f"functions a2pack_api() does not give: {missing}"
    unknown = sorted(tabled() - set(HEADER.functions))
    assert not unknown, f"table entries with no function of that name: {unknown}"


def test_one_spelling_per_verb_and_the_old_ones_are_aliases():
    text = (REPO / "include" / "a2pack.h").read_text()
    for old, new in ALIASES.items():
        a, b = HEADER.functions[old], HEADER.functions[new]
        assert a.c().replace(old, "X") == b.c().replace(new, "X"), (old, new)
        assert re.search(rf"{old} is\s+\* its alias", text), f"{old} is not documented as an alias"
    # No other function spells a verb the old way.
    odd = [n for n in HEADER.functions if n not in ALIASES and (
        re.search(r"_(get|save|load)_(info|stats|state)$", n) or re.search(r"_(info|stats|state)$", n)
        and not n.endswith(("stats_json", "export_arrow_stats", "state_value")))]
    assert not odd, f"old spellings without an alias: {odd}"


def test_the_aliases_are_the_same_functions_at_run_time():
    import a2pack._native as native  # noqa: PLC0415
    for old, new in ALIASES.items():
        assert getattr(native.lib, old) and getattr(native.lib, new)
