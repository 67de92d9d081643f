"""The Lesson's steps, by topic. pages/lesson.py holds the step list and its navigation; `common` the examples, the
URL schema and the helpers the steps share; then `retrieval` (steps 1–4), `scores` (5–8), `matrices` (9–12), `models`
(13–16), `experiments` (17–20: a head turned off, weight against importance, watching it write, the needle), `why`
(21) and `long` (22: the heads a long document needs). Each step is one function of (text column, figure column)."""
