"""A calibrated linear softmax head: fitted with scikit-learn, applied with numpy, stored as plain arrays.

`fit` trains a class-weighted multinomial logistic regression on [dense | sparse TF-IDF] features and then a
temperature on out-of-fold logits (5-fold), so that `predict_proba` gives calibrated confidences. Each fold's
solver starts from the full fit's weights (the loss is strictly convex, so the optimum is the same; from there a
fold takes 2-3 Newton steps instead of 5-7). With `lexical_blend` > 0 it also fits a second logistic regression
on the TF-IDF block alone and adds its logits, scaled by the blend, to the first's: a sum of two linear maps is one
linear map, so the second is folded into the TF-IDF weights and the bias, and the head keeps its shape (the
embedding weights are the first model's).
The weights are kept as arrays (no pickle): `to_arrays` / `from_arrays` round-trip them through an .npz file.
"""

from __future__ import annotations

import numpy as np


# Newton's method with conjugate gradients reaches the optimum in 5-7 steps on these problems (a few thousand issues,
# ~21,000 columns) where lbfgs took 30-70 and stopped short of it: 1.5 to 11 times faster here (bench/eval).
SOLVER = "newton-cg"


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """The T > 0 minimising the negative log-likelihood of softmax(logits / T) (grid + refinement)."""
    def nll(t: float) -> float:
        p = softmax(logits / t)
        return float(-np.log(np.clip(p[np.arange(len(y)), y], 1e-12, 1)).mean())

    grid = np.exp(np.linspace(np.log(0.05), np.log(20), 80))
    best = min(grid, key=nll)
    for step in (1.1, 1.02):
        cands = best * step ** np.arange(-10, 11)
        best = min(cands, key=nll)
    return float(best)


class LinearHead:
    """Hyperparameters in the constructor, `fit` returns the head, learned attributes end in an underscore
    (scikit-learn's shape); `sparse_weight` scales the TF-IDF block against the dense block (folded into the
    weights, so prediction takes unscaled TF-IDF rows); `lexical_C` and `lexical_blend` are the regularisation
    strength and the weight of the TF-IDF-only model (blend 0: none); `calibrate=False` skips the temperature
    (T = 1); `solver`: scikit-learn's name of the optimiser (bench/eval compares them)."""

    def __init__(self, C: float = 8.0, sparse_weight: float = 1.0, calibrate: bool = True, seed: int = 0,
                 lexical_C: float = 10.0, lexical_blend: float = 0.0, solver: str = SOLVER):
        self.C, self.sparse_weight, self.calibrate, self.seed = C, sparse_weight, calibrate, seed
        self.lexical_C, self.lexical_blend, self.solver = lexical_C, lexical_blend, solver

    def fit(self, dense: np.ndarray, sparse, y: list[str], classes: list[str]) -> "LinearHead":
        """Fit on [dense | sparse] features; `classes` orders the labels (those absent from `y` are dropped)."""
        from scipy.sparse import csr_matrix, hstack
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold

        present = [c for c in classes if c in set(y)]
        yi = np.array([present.index(v) for v in y])
        X = hstack([csr_matrix(dense), sparse * self.sparse_weight]).tocsr()
        nd = dense.shape[1]

        def regression(C: float, start) -> "LogisticRegression":
            r = LogisticRegression(C=C, class_weight="balanced", max_iter=2000, random_state=self.seed,
                                   solver=self.solver, warm_start=start is not None)
            if start is not None:  # the solver starts from the full fit's weights (same classes, same columns)
                r.coef_, r.intercept_ = start.coef_.copy(), start.intercept_.copy()
            return r

        def fitted(rows, start: tuple = (None, None)) -> tuple:
            """The model on [dense | weighted TF-IDF] and, with a blend, the TF-IDF-only model, fitted on `rows`
            (so both on the same classes); `start`: fitted models whose weights the solver starts from."""
            m = regression(self.C, start[0]).fit(X[rows], yi[rows])
            if self.lexical_blend <= 0:
                return m, None
            return m, regression(self.lexical_C, start[1]).fit(sparse[rows], yi[rows])

        m, lex = fitted(np.arange(len(y)))
        temperature = 1.0
        if self.calibrate:  # out-of-fold logits for the temperature
            oof = np.zeros((len(y), len(present)))
            n_splits = max(2, min(5, int(np.bincount(yi).min())))
            for tr, te in StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=self.seed).split(X, yi):
                whole = len(np.unique(yi[tr])) == len(present)  # a fold without some class starts cold
                fm, flex = fitted(tr, (m, lex) if whole else (None, None))
                z = fm.decision_function(X[te])
                if flex is not None:
                    z = z + self.lexical_blend * flex.decision_function(sparse[te])
                oof[np.ix_(te, fm.classes_)] = z
            temperature = _fit_temperature(oof, yi)
        coef, bias = m.coef_.T.copy(), m.intercept_.copy()  # (n_features, k)
        coef[nd:] *= self.sparse_weight  # so that prediction takes unweighted TF-IDF rows
        if lex is not None:  # the sum of the two linear maps, folded into one
            coef[nd:] += self.lexical_blend * lex.coef_.T
            bias += self.lexical_blend * lex.intercept_
        coef = coef.astype(np.float32)
        self.classes_ = present
        self.w_dense_, self.w_sparse_ = coef[:nd], coef[nd:]
        self.bias_, self.temperature_ = bias.astype(np.float32), temperature
        return self

    def scale_prior(self, label: str, weight: float) -> "LinearHead":
        """Multiply the odds of `label` by `weight` (its bias moves by log(weight)): for a class the issues met
        later hold less of than the labeled set does. A label the head does not know is left alone."""
        if weight != 1.0 and label in self.classes_:
            self.bias_ = self.bias_.copy()
            self.bias_[self.classes_.index(label)] += np.float32(np.log(weight))
        return self

    def logits(self, dense: np.ndarray, sparse_rows: list[tuple[np.ndarray, np.ndarray]], first: int = 0) -> np.ndarray:
        """Logits from dense features (their columns are the weights' rows from `first` on) and TF-IDF rows."""
        z = dense @ self.w_dense_[first:] + self.bias_
        for i, (idx, vals) in enumerate(sparse_rows):
            if len(idx):
                z[i] += vals @ self.w_sparse_[idx]
        return z

    def predict_proba(self, dense: np.ndarray, sparse_rows: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        return softmax(self.logits(dense, sparse_rows) / self.temperature_)

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}_w_dense": self.w_dense_, f"{prefix}_w_sparse": self.w_sparse_,
                f"{prefix}_bias": self.bias_, f"{prefix}_temperature": np.array([self.temperature_])}

    @classmethod
    def from_arrays(cls, arrays, prefix: str, classes: list[str]) -> "LinearHead":
        head = cls()
        head.classes_ = list(classes)
        head.w_dense_, head.w_sparse_ = arrays[f"{prefix}_w_dense"], arrays[f"{prefix}_w_sparse"]
        head.bias_, head.temperature_ = arrays[f"{prefix}_bias"], float(arrays[f"{prefix}_temperature"][0])
        return head
