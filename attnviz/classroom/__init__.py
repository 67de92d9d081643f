"""A live class: the presenter's step and view on every student's page, predict-then-reveal questions for each lesson
step, and a concept quiz before and after that measures what the class learned. No streamlit here.

- `questions`: each step's questions, their truths computed from the step's own numbers;
- `quiz`: the concept quiz's items (a JSON file with a schema), scores and the normalised gain;
- `store`: a class's state and answers, in SQLite or Redis behind one interface;
- `live`: the state as the pages receive it; `http`: the HTTP contract and its event streams (ASGI)."""
