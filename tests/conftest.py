import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
