"""RETURNN's `preload_from_files` as a test does it: a config's search network built in
TensorFlow, a checkpoint of another network loaded into it by a `var_name_mapping`."""

from __future__ import annotations

from pathlib import Path


def preloaded_search_params(config: Path, checkpoint: Path, mapping: dict[str, str]) -> dict:
    """Each variable of `config`'s search network -> its value after loading `checkpoint` by
    `mapping` (RETURNN's `CustomCheckpointLoader`; variables not mapped keep their initial values)."""
    import tensorflow as tf
    from returnn.config import Config
    from returnn.tf.network import CustomCheckpointLoader, TFNetwork

    cfg = Config()
    cfg.load_file(str(config))
    tf.compat.v1.disable_eager_execution()
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        net = TFNetwork(config=cfg, train_flag=False, search_flag=True)
        net.construct_from_dict(cfg.typed_value("search_network"))
        session.run(tf.compat.v1.global_variables_initializer())
        loader = CustomCheckpointLoader(
            filename=str(checkpoint),
            saveable_params=net.get_params_list(),
            ignore_missing=True,
            var_name_mapping=mapping,
        )
        loader.load_now(session=session)
        return {v.name[:-2]: session.run(v) for v in net.get_params_list()}
