"""The `forecast` commands, one module per group; pipelines/cli.py only wires them into the app.

- training: train, evaluate, backtest, datasets (reports: what `train` prints)
- sweep: sweep
- predicting: predict (locally or on Spark)
- registry: compare, runs, register, promote
- serving: serve, ui
- monitoring: monitor, upgrade-log, retrain
- common: the options, errors and output every group shares"""
