"""`make demo`: train a quick LSTM and a quick seq2seq-with-attention on Melbourne temperatures
into the local MLflow store, register both, keep the better one as @champion (the promotion gate:
lower MAE on the selection window, never test), compare, and say how to look at it and serve it."""

from __future__ import annotations

import time
from pathlib import Path

CONFIGS = Path(__file__).parent / "configs"
MODEL_NAME = "demo-forecaster"
EXPERIMENT = "demo"


def main() -> None:
    import mlflow

    from pipelines.cli import app
    from pipelines.shared_view import view_url

    started = time.perf_counter()
    for config in ("quick-lstm.yaml", "quick-seq2seq-attention.yaml"):
        print(f"\n== forecast train --config pipelines/configs/{config} --register {MODEL_NAME}")
        app(["train", "--config", str(CONFIGS / config), "--register", MODEL_NAME], standalone_mode=False)
    print(f"\n== forecast compare --experiment {EXPERIMENT}")
    app(["compare", "--experiment", EXPERIMENT], standalone_mode=False)
    experiment = mlflow.get_experiment_by_name(EXPERIMENT)
    # the comparison `forecast compare` just wrote as the UI's shared view (pipelines/shared_view.py)
    runs_page = view_url(mlflow.get_tracking_uri(), experiment.experiment_id)
    print(
        f"\nDemo finished in {time.perf_counter() - started:.0f} s. The better model holds "
        f"models:/{MODEL_NAME}@champion.\n"
        f"  Look at the runs:   .venv/bin/forecast ui        (then open {runs_page})\n"
        f"  Serve the champion: .venv/bin/forecast serve --model-uri models:/{MODEL_NAME}@champion\n"
        "  Ask for a forecast: see README.md, 'Serve the champion'"
    )


if __name__ == "__main__":
    main()
