"""Apache Beam IO for a2pack: record files, packfiles and step datasets on
any Beam runner (Direct, Dataflow, Flink, Spark).

    import apache_beam as beam
    from a2pack import beam as a2beam

    with beam.Pipeline() as p:
        (p | a2beam.ReadFromBag("in@*.bagz") | beam.Map(fix) | a2beam.WriteToBag("out@4.bagz"))
    with beam.Pipeline() as p:
        (p | a2beam.ReadRunFiles("runs/") | a2beam.BuildDataset("ds/", source_input="runs/",
                                                                   source_kind="dir"))

ReadFromBag / WriteToBag take the arguments of ``bagz.beam.bagzio``'s
ReadFromBagz / WriteToBagz (pipelines run after changing the import).
Importing this module needs ``apache-beam`` (``pip install 'a2pack[beam]'``);
``import a2pack`` alone never imports Beam. Every transform reports display
data and counters in the ``a2pack`` namespace: records_read, bytes_read,
records_written, bytes_written, bad_runs_skipped, runs_built, rows_built.
See docs/beam.md.
"""

from ._common import NAMESPACE  # raises a clear ImportError without apache-beam
from ._bag import ReadFromBag, WriteToBag
from ._pack import ReadFromPack, ReadRunFiles
from ._pack_write import WriteToPack
from ._dataset import BuildDataset
from ._dataset_append import AppendToDataset

# The names of bagz.beam.bagzio and sackli.beam.sacklio, so that their
# pipelines (and tests) run with only the import changed.
ReadFromBagz = ReadFromSackli = ReadFromBag
WriteToBagz = WriteToSackli = WriteToBag

__all__ = ["NAMESPACE", "ReadFromBag", "WriteToBag", "ReadFromPack", "ReadRunFiles",
           "WriteToPack", "BuildDataset", "AppendToDataset", "ReadFromBagz", "WriteToBagz", "ReadFromSackli",
           "WriteToSackli"]
